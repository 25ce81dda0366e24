package journal

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
)

// httpDo sends one request to h's journal API and returns the status and
// the body.
func httpDo(t *testing.T, srv *httptest.Server, method, path string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(resp.Body.Close)
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// jsonError fails unless body is {"error":"..."} mentioning every want.
func jsonError(t *testing.T, what, body string, want ...string) {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
		t.Fatalf("%s: body %.300q is not a JSON error", what, body)
	}
	for _, w := range want {
		if !strings.Contains(e.Error, w) {
			t.Errorf("%s: error %q does not mention %q", what, e.Error, w)
		}
	}
}

// A body over the limit is refused whole (413), not
// cut at the limit with the events before it appended.
func TestHandlerBodyOverLimit(t *testing.T) {
	h := newHarness(t, 1)
	srv := httptest.NewServer(Handler(h.j))
	defer srv.Close()
	path := "/journal/" + h.topic + "/big"
	// Two small events 64 MiB of blanks apart: cut at 64 MiB, the first
	// still decodes.
	body := io.MultiReader(strings.NewReader(`{"seqNr":1}`+"\n"), strings.NewReader(strings.Repeat(" ", 64<<20)), strings.NewReader("\n"+`{"seqNr":2}`+"\n"))
	status, b := httpDo(t, srv, "POST", path, body)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST of 64 MiB + 24 bytes: %d %.200q, want 413", status, b)
	}
	jsonError(t, "413", b, "64 MiB")
	if status, b := httpDo(t, srv, "GET", path+"/pointer", nil); status != 200 || strings.TrimSpace(b) != `{"seqNr":null}` {
		t.Fatalf("pointer after a refused body: %d %s, want null (nothing appended)", status, b)
	}
}

// An event too large for one Kafka record gets 413
// naming the limit, not 500; so does one over the topic's max.message.bytes
// (the broker's refusal).
func TestHandlerEventOverRecordLimit(t *testing.T) {
	h := newHarness(t, 1)
	srv := httptest.NewServer(Handler(h.j))
	defer srv.Close()
	payload := `"` + strings.Repeat("x", 5<<20) + `"`
	status, b := httpDo(t, srv, "POST", "/journal/"+h.topic+"/five-mb", strings.NewReader(`{"seqNr":1,"payload":`+payload+`}`))
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST of a 5 MB event: %d %.300q, want 413", status, b)
	}
	jsonError(t, "5 MB event", b, "1000012", "bytes")

	// A topic whose max.message.bytes is below the producer's limit: the
	// broker refuses the record.
	small := h.topic + "-small"
	v := "20000"
	resp, err := kadm.NewClient(h.client).CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &v}, small)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", small, err, resp.Err)
	}
	// Random letters: the producer compresses batches, so a repeated byte
	// would fit.
	noise := make([]byte, 37500)
	rand.Read(noise)
	payload = `"` + base64.StdEncoding.EncodeToString(noise) + `"`
	status, b = httpDo(t, srv, "POST", "/journal/"+small+"/fifty-kb", strings.NewReader(`{"seqNr":1,"payload":`+payload+`}`))
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST of 50 kB to a topic with max.message.bytes=20000: %d %.300q, want 413", status, b)
	}
	jsonError(t, "50 kB event", b, "max.message.bytes")
}

// Journal ids have a documented limit (1..1024 bytes
// of UTF-8) and topics Kafka's rules; anything else is 400.
func TestHandlerIDLimits(t *testing.T) {
	h := newHarness(t, 1)
	srv := httptest.NewServer(Handler(h.j))
	defer srv.Close()
	ok := strings.Repeat("i", 1024)
	if status, b := httpDo(t, srv, "POST", "/journal/"+h.topic+"/"+ok, strings.NewReader(`{"seqNr":1}`)); status != 200 {
		t.Fatalf("append to a 1024-byte id: %d %s", status, b)
	}
	for _, tc := range []struct{ name, topic, id, want string }{
		{"id of 1025 bytes", h.topic, strings.Repeat("i", 1025), "1025 bytes"},
		{"id of 100 kB", h.topic, strings.Repeat("i", 100_000), "1024"},
		{"id not UTF-8", h.topic, "%FF%FE", "UTF-8"},
		{"topic with a space", "a%20b", "x", "topic"},
		{"topic of 250 characters", strings.Repeat("t", 250), "x", "249"},
	} {
		for _, req := range []struct{ method, suffix, body string }{
			{"POST", "", `{"seqNr":1}`},
			{"GET", "", ""},
			{"GET", "/pointer", ""},
			{"POST", "/purge", ""},
			{"POST", "/delete?to=1", ""},
		} {
			status, b := httpDo(t, srv, req.method, "/journal/"+tc.topic+"/"+tc.id+req.suffix, strings.NewReader(req.body))
			if status != http.StatusBadRequest {
				t.Errorf("%s: %s %s: %d %.200q, want 400", tc.name, req.method, req.suffix, status, b)
				continue
			}
			jsonError(t, tc.name, b, tc.want)
		}
	}
}

// A request for a topic that does not exist is
// answered at once with 404 (the journal never creates topics: a journal's
// partition count must not change, and an auto-created topic gets the
// broker's default), and the topic is still not there afterwards.
func TestHandlerUnknownTopic(t *testing.T) {
	h := newHarness(t, 1)
	srv := httptest.NewServer(Handler(h.j))
	defer srv.Close()
	missing := h.topic + "-missing"
	for _, req := range []struct{ method, suffix, body string }{
		{"POST", "", `{"seqNr":1}`},
		{"GET", "", ""},
		{"GET", "/pointer", ""},
		{"POST", "/purge", ""},
		{"POST", "/delete?to=1", ""},
	} {
		start := time.Now()
		status, b := httpDo(t, srv, req.method, "/journal/"+missing+"/x"+req.suffix, strings.NewReader(req.body))
		took := time.Since(start)
		if status != http.StatusNotFound {
			t.Errorf("%s %s on a missing topic: %d %.200q after %v, want 404", req.method, req.suffix, status, b, took)
			continue
		}
		jsonError(t, req.method+req.suffix, b, missing, "does not exist")
		if took > 3*time.Second {
			t.Errorf("%s %s on a missing topic took %v", req.method, req.suffix, took)
		}
	}
	topics, err := kadm.NewClient(h.client).ListTopics(context.Background(), missing)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := topics[missing]; ok && d.Err == nil {
		t.Fatalf("topic %s was created by the requests", missing)
	}
}

// A lower body limit of the server around the handler (streamd's admin
// max_body_bytes) is the one the 413 names.
func TestHandlerBodyOverServerLimit(t *testing.T) {
	h := newHarness(t, 1)
	inner := Handler(h.j)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1000)
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	status, b := httpDo(t, srv, "POST", "/journal/"+h.topic+"/x", strings.NewReader(`{"seqNr":1,"payload":"`+strings.Repeat("x", 2000)+`"}`))
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST of 2 kB under a 1000-byte server limit: %d %s", status, b)
	}
	jsonError(t, "413", b, "1000 bytes")
}
