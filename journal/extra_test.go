package journal

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/record"
)

func TestQuarantine(t *testing.T) {
	h := newHarness(t, 1)
	qtopic := h.topic + "-quarantine"
	h.broker.CreateTopic(t, qtopic, 1)
	h.rep.o.quarantine = QuarantineTo(h.client, qtopic)
	key := Key{Topic: h.topic, ID: "q"}
	if _, err := h.j.Append(h.ctx, key, ev(1, 2)); err != nil {
		t.Fatal(err)
	}
	bad := []*kgo.Record{
		{Topic: h.topic, Key: []byte("q"), Headers: []kgo.RecordHeader{{Key: action.HeaderKey, Value: []byte(`{"delete":{"to":"x"}}`)}}},
		{Topic: h.topic, Key: []byte("q"), Value: []byte(`not json`), Headers: []kgo.RecordHeader{{Key: action.HeaderKey, Value: []byte(`{"append":{"range":{"from":3,"to":3},"payloadType":"json"}}`)}}},
		{Topic: h.topic, Key: []byte("q"), Value: []byte(`{"events":[{"seqNr":4}]}`), Headers: []kgo.RecordHeader{{Key: action.HeaderKey, Value: []byte(`{"append":{"range":{"from":3,"to":3},"payloadType":"json"}}`)}}},
	}
	if err := h.client.ProduceSync(h.ctx, bad...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.j.Append(h.ctx, key, ev(3)); err != nil {
		t.Fatal(err)
	}
	h.sync(0)
	if got := h.read(key, 1); !reflect.DeepEqual(got, []int64{1, 2, 3}) {
		t.Fatalf("read %v after malformed records, want [1 2 3]", got)
	}
	if st := h.rep.Stats(); st.Quarantined != 3 {
		t.Fatalf("stats %+v, want 3 quarantined", st)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(h.rep.Collector())
	if n := counterValue(t, reg, "streamd_journal_replicator_records_total", "quarantined"); n != 3 {
		t.Fatalf("quarantined metric %v, want 3", n)
	}
	// The quarantine topic holds them with the reasons.
	cl := h.broker.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{qtopic: {0: kgo.NewOffset().AtStart()}}))
	var reasons []string
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	for len(reasons) < 3 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("quarantine topic has %d records: %v", len(reasons), reasons)
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, x := range r.Headers {
				if x.Key == QuarantineReasonHeader {
					reasons = append(reasons, string(x.Value))
				}
			}
		})
	}
	for i, want := range []string{"to is not an integer", "json payload", "header range 3..3 but events 4..4"} {
		if !strings.Contains(reasons[i], want) {
			t.Errorf("reason %d %q, want it to mention %q", i, reasons[i], want)
		}
	}
}

// counterValue returns the value of one labelled counter from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{outcome=%q}", name, outcome)
	return 0
}

func TestQuarantineFailureFailsTheBatch(t *testing.T) {
	st := NewMemoryStore()
	boom := errors.New("boom")
	rep, _ := NewReplicator(st, WithQuarantine(func(context.Context, record.Record, error) error { return boom }))
	rec := record.Record{Topic: "t", Key: []byte("k"), Headers: []record.Header{{Key: action.HeaderKey, Value: []byte(`{"purge":{"origin":1}}`)}}}
	if _, err := rep.Write(context.Background(), []record.Record{rec}); !errors.Is(err, boom) {
		t.Fatalf("Write error %v, want the quarantine's", err)
	}
	if _, ok, _ := st.s.Pointer(context.Background(), "t", 0); ok {
		t.Fatal("pointer stored past a record that was neither applied nor quarantined")
	}
}

func TestExpiry(t *testing.T) {
	h := newHarness(t, 1)
	key := Key{Topic: h.topic, ID: "exp"}
	keep := Key{Topic: h.topic, ID: "keep"}
	if _, err := h.j.Append(h.ctx, key, ev(1, 2), ExpireAfter(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.j.Append(h.ctx, keep, ev(1)); err != nil {
		t.Fatal(err)
	}
	h.sync(0)
	if n, err := h.rep.PurgeExpired(h.ctx, h.j, time.Now()); err != nil || n != 0 {
		t.Fatalf("PurgeExpired now: %d, %v; want 0", n, err)
	}
	n, err := h.rep.PurgeExpired(h.ctx, h.j, time.Now().Add(2*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("PurgeExpired in 2h: %d, %v; want 1", n, err)
	}
	// The Purge is in Kafka: readers see it before the replicator does.
	if got := h.read(key, 1); got != nil {
		t.Fatalf("expired journal read %v before replication", got)
	}
	h.sync(0)
	if got := h.read(key, 1); got != nil {
		t.Fatalf("expired journal read %v", got)
	}
	if got := h.read(keep, 1); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("journal without expiry read %v", got)
	}
	if n, _ := h.rep.PurgeExpired(h.ctx, h.j, time.Now().Add(2*time.Hour)); n != 0 {
		t.Fatalf("purged %d again", n)
	}
	// A later append without expireAfter clears the expiry.
	if _, err := h.j.Append(h.ctx, keep, ev(2), ExpireAfter(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.j.Append(h.ctx, keep, ev(3)); err != nil {
		t.Fatal(err)
	}
	h.sync(0)
	if n, _ := h.rep.PurgeExpired(h.ctx, h.j, time.Now().Add(2*time.Hour)); n != 0 {
		t.Fatalf("purged %d journals whose expiry was cleared", n)
	}
}

type fakeSink struct{ got [][]record.Record }

func (f *fakeSink) Write(_ context.Context, b []record.Record) ([]error, error) {
	f.got = append(f.got, append([]record.Record(nil), b...))
	return make([]error, len(b)), nil
}

func TestPluginStore(t *testing.T) {
	sink := &fakeSink{}
	st := NewPluginStore(sink)
	if st.Readable() {
		t.Fatal("plugin store says it is readable")
	}
	rep, _ := NewReplicator(st)
	hdr := func(s string) []record.Header { return []record.Header{{Key: action.HeaderKey, Value: []byte(s)}} }
	batch := []record.Record{
		{Topic: "t", Partition: 2, Offset: 10, Key: []byte("a"), Value: []byte(`{"events":[{"seqNr":1,"tags":[],"payloadType":"json","payload":1}],"metadata":{}}`), Headers: hdr(`{"append":{"range":{"from":1,"to":1},"payloadType":"json","metadata":{}}}`)},
		{Topic: "t", Partition: 2, Offset: 11, Key: []byte("a"), Headers: hdr(`{"mark":{"id":"x"}}`)},
		{Topic: "t", Partition: 2, Offset: 12, Key: []byte("a"), Value: []byte(`{"events":[{"seqNr":2,"tags":[],"payloadType":"json","payload":2}],"metadata":{}}`), Headers: hdr(`{"append":{"range":{"from":2,"to":2},"payloadType":"json","metadata":{}}}`)},
		{Topic: "t", Partition: 2, Offset: 13, Key: []byte("b"), Headers: hdr(`{"delete":{"to":4}}`)},
	}
	if _, err := rep.Write(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if len(sink.got) != 1 || len(sink.got[0]) != 4 {
		t.Fatalf("sink got %d batches: %+v", len(sink.got), sink.got)
	}
	// One record per Append action (the plugin accepts or refuses each on
	// its own), no Mark, then the Delete and the pointer.
	recs := sink.got[0]
	for i, want := range []struct {
		off           int64
		header, value string
	}{
		{10, `{"append":{"range":{"from":1,"to":1},"payloadType":"json","metadata":{}}}`, `{"events":[{"seqNr":1,"tags":[],"payloadType":"json","payload":1}],"metadata":{}}`},
		{12, `{"append":{"range":{"from":2,"to":2},"payloadType":"json","metadata":{}}}`, `{"events":[{"seqNr":2,"tags":[],"payloadType":"json","payload":2}],"metadata":{}}`},
	} {
		h, _ := recs[i].Header(action.HeaderKey)
		if string(recs[i].Key) != "a" || recs[i].Offset != want.off || string(h) != want.header || string(recs[i].Value) != want.value {
			t.Errorf("append record %d: key %s offset %d header %s value %s; want offset %d header %s value %s", i, recs[i].Key, recs[i].Offset, h, recs[i].Value, want.off, want.header, want.value)
		}
	}
	h2, _ := recs[2].Header(action.HeaderKey)
	if string(recs[2].Key) != "b" || string(h2) != `{"delete":{"to":4}}` {
		t.Errorf("delete record: %s %s", recs[2].Key, h2)
	}
	p, _ := recs[3].Header(PointerHeader)
	if recs[3].Key != nil || string(p) != "13" {
		t.Errorf("pointer record: key %q pointer %q", recs[3].Key, p)
	}
}

func TestHandler(t *testing.T) {
	h := newHarness(t, 1)
	srv := httptest.NewServer(Handler(h.j))
	defer srv.Close()
	base := srv.URL + "/journal/" + h.topic + "/acc%2F1"
	do := func(method, url, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer testenv.Ignore(resp.Body.Close)
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/pointer", "", 200, `{"seqNr":null}`},
		{"POST", "", "{\"seqNr\":1,\"payload\":{\"a\":1},\"tags\":[\"x\"]}\n{\"seqNr\":2,\"payloadType\":\"text\",\"payload\":\"hi\"}\n", 200, `{"partition":0,"offset":`},
		{"GET", "", "", 200, "{\"seqNr\":1,\"tags\":[\"x\"],\"payload\":{\"a\":1}}\n{\"seqNr\":2,\"payloadType\":\"text\",\"payload\":\"hi\"}\n"},
		{"GET", "?from=2", "", 200, "{\"seqNr\":2,\"payloadType\":\"text\",\"payload\":\"hi\"}\n"},
		{"GET", "/pointer", "", 200, `{"seqNr":2}`},
		{"POST", "", `{"seqNr":2}`, 409, `"seqNr":2}`}, // not above the journal's seqNr
		{"POST", "", `{"seqNr":0}`, 400, `seqNr 0`},
		{"POST", "", ``, 400, `no events`},
		{"GET", "?from=x", "", 400, `want a seqNr`},
		{"POST", "/delete?to=1", "", 200, `{"partition"`},
		{"GET", "?from=1", "", 200, "{\"seqNr\":2,\"payloadType\":\"text\",\"payload\":\"hi\"}\n"},
		{"POST", "/delete", "", 400, `want a seqNr`},
		{"POST", "/purge", "", 200, `{"partition"`},
		{"GET", "", "", 200, ``},
		{"GET", "/pointer", "", 200, `{"seqNr":null}`},
		{"POST", "/delete?to=5", "", 200, `null`},
	}
	for i, tt := range tests {
		status, body := do(tt.method, base+tt.path, tt.body)
		if status != tt.status || !strings.HasPrefix(strings.TrimSpace(body), strings.TrimSpace(tt.want)) && !strings.Contains(body, tt.want) {
			t.Errorf("%d: %s %s: %d %q, want %d %q", i, tt.method, tt.path, status, body, tt.status, tt.want)
		}
		if tt.want == "" && body != "" {
			t.Errorf("%d: %s %s: body %q, want empty", i, tt.method, tt.path, body)
		}
	}
	// %2F in the path is a slash in the id.
	if status, body := do("POST", srv.URL+"/journal/"+h.topic+"/acc%2F2", `{"seqNr":7}`); status != 200 {
		t.Fatalf("append to acc%%2F2: %d %s", status, body)
	}
	if p := h.pointer(Key{Topic: h.topic, ID: "acc/2"}); p != 7 {
		t.Fatalf("pointer of acc/2 = %d, want 7", p)
	}
}
