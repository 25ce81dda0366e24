package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamd/streamd/internal/daemon/admin"
	"github.com/streamd/streamd/internal/daemon/console"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/file"
	"github.com/streamd/streamd/pipeline/generate"
)

// runPipeline runs a generator pipeline until the test ends.
func runPipeline(t *testing.T, name string, rate float64) *pipeline.Pipeline {
	t.Helper()
	p := pipeline.New(name, generate.NewSource(rate, 0, 10), file.DropSink{}, pipeline.WithBatch(100, 1<<20, 10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }() // the generator runs until the test cancels it
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// serve mounts c on an admin server with a 1 s write timeout (an event
// stream must outlive it) and returns its base URL.
func serve(t *testing.T, c *console.Console, opts ...admin.Option) string {
	t.Helper()
	srv := admin.New(prometheus.NewRegistry(), func() []*pipeline.Pipeline { return nil }, nil,
		append([]admin.Option{admin.WithTimeouts(admin.Timeouts{Write: time.Second})}, opts...)...)
	srv.HandlePrefix("/ui/", c)
	srv.Handle("/ui", c)
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Cleanup(t, func() error { return srv.Shutdown(context.Background()) })
	return "http://" + addr
}

type event struct {
	name, id string
	data     json.RawMessage
}

// readEvents reads server-sent events from r onto a channel.
func readEvents(r io.Reader) <-chan event {
	ch := make(chan event, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ch <- ev
				}
				ev = event{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = json.RawMessage(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	return ch
}

type tick struct {
	T       int64                       `json:"t"`
	Samples map[string][]console.Sample `json:"samples"`
	Status  map[string]struct {
		State string `json:"state"`
	} `json:"status"`
}

func next(t *testing.T, ch <-chan event, d time.Duration) (event, tick) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the event stream ended")
		}
		var tk tick
		if err := json.Unmarshal(ev.data, &tk); err != nil {
			t.Fatalf("event %s: %v", ev.name, err)
		}
		return ev, tk
	case <-time.After(d):
		t.Fatalf("no event within %s", d)
	}
	panic("unreachable")
}

// TestEvents: the stream starts with the history, then one tick per
// sampling with only the new samples; it outlives the admin server's
// write timeout; the ring keeps at most history/interval samples; a
// reconnect with Last-Event-ID gets only what it missed; Close ends it.
func TestEvents(t *testing.T) {
	p := runPipeline(t, "gen", 2000)
	c := console.New(console.WithPipelines(func() []console.Pipeline { return []console.Pipeline{{Name: "gen", P: p}} }),
		console.WithSampling(100*time.Millisecond, time.Second))
	base := serve(t, c)
	c.Start()
	time.Sleep(1500 * time.Millisecond) // more than the history: the ring wraps

	res, err := http.Get(base + "/ui/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(res.Body.Close)
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	ch := readEvents(res.Body)
	ev, hello := next(t, ch, 5*time.Second)
	if ev.name != "hello" {
		t.Fatalf("first event %q", ev.name)
	}
	h := hello.Samples["gen"]
	if len(h) < 5 || len(h) > 10 {
		t.Fatalf("history of %d samples, want at most 10 (1 s of 100 ms) and some", len(h))
	}
	for i := 1; i < len(h); i++ {
		if h[i].T <= h[i-1].T {
			t.Fatalf("history not in time order at %d", i)
		}
	}
	last := hello.T
	deadline := time.Now().Add(2500 * time.Millisecond) // past the 1 s write timeout
	var ticks, outs int
	var rate float64
	for time.Now().Before(deadline) {
		ev, tk := next(t, ch, 5*time.Second)
		if ev.name != "tick" {
			t.Fatalf("event %q after hello", ev.name)
		}
		ss := tk.Samples["gen"]
		if len(ss) == 0 || ss[0].T <= last {
			t.Fatalf("tick repeats samples: first %v, last seen %d", ss, last)
		}
		last = ss[len(ss)-1].T
		for _, s := range ss {
			if s.State == pipeline.StateRunning {
				rate += s.Out
				outs++
			}
		}
		ticks++
	}
	if ticks < 10 {
		t.Fatalf("%d ticks in 2.5 s at 100 ms", ticks)
	}
	if avg := rate / float64(outs); avg < 1000 || avg > 3000 {
		t.Fatalf("mean out rate %.0f/s, generator at 2000/s", avg)
	}

	// A reconnect gets the samples after its Last-Event-ID only.
	req, _ := http.NewRequest("GET", base+"/ui/api/events", nil)
	mark := hello.Samples["gen"][len(h)-1].T
	req.Header.Set("Last-Event-ID", jsonNum(mark))
	res2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(res2.Body.Close)
	ch2 := readEvents(res2.Body)
	_, again := next(t, ch2, 5*time.Second)
	for _, s := range again.Samples["gen"] {
		if s.T <= mark {
			t.Fatalf("resumed stream repeats sample %d (asked after %d)", s.T, mark)
		}
	}

	testenv.Close(t, context.Background(), c)
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end at Close")
	}
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestAPIErrors: what the console answers to requests it cannot serve.
func TestAPIErrors(t *testing.T) {
	p := runPipeline(t, "gen", 10)
	c := console.New(console.WithPipelines(func() []console.Pipeline {
		return []console.Pipeline{{Name: "gen", P: p, Policy: "stop"}}
	}))
	base := serve(t, c)
	defer testenv.Close(t, context.Background(), c)
	tests := []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"GET", "/ui", "", 200, "<title>streamd console</title>"}, // redirected to /ui/
		{"GET", "/ui/", "", 200, "<title>streamd console</title>"},
		{"GET", "/ui/app.js", "", 200, "streamdConsole"},
		{"GET", "/ui/nope.js", "", 404, "no such console file"},
		{"GET", "/ui/../admin.go", "", 404, ""},
		{"POST", "/ui/", "", 405, "read with GET"},
		{"GET", "/ui/api/nope", "", 404, "no such console API"},
		{"GET", "/ui/api/pipelines/other", "", 404, `no pipeline \"other\"`},
		{"GET", "/ui/api/pipelines/gen", "", 200, `"name":"gen"`},
		{"GET", "/ui/api/dlq/gen", "", 404, `has no dead-letter topic (errors.policy = \"stop\")`},
		{"POST", "/ui/api/dlq/gen/replay", `{"to":"source"}`, 404, "has no dead-letter topic"},
		{"GET", "/ui/api/replays/9", "", 404, `no replay \"9\"`},
		{"GET", "/ui/api/journal", "", 404, "no [journal]"},
		{"GET", "/ui/api/fluid", "", 404, "no [fluid]"},
		{"GET", "/ui/api/info", "", 200, `"pipelines":[{"name":"gen"`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body))
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != tt.code || !strings.Contains(string(b), tt.want) {
				t.Fatalf("%d %s, want %d with %q", res.StatusCode, b, tt.code, tt.want)
			}
		})
	}
}

// TestAuth: behind the admin server's tokens, a read token reads the
// console's API and may not start a replay; without a token nothing.
func TestAuth(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	if err := os.WriteFile(file, []byte("read viewer r-token-0123456789abcdef\nwrite operator w-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := admin.LoadTokens(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := runPipeline(t, "gen", 10)
	c := console.New(console.WithPipelines(func() []console.Pipeline { return []console.Pipeline{{Name: "gen", P: p}} }))
	base := serve(t, c, admin.WithTokens(toks))
	defer testenv.Close(t, context.Background(), c)
	call := func(method, path, token string) int {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	for _, tt := range []struct {
		method, path, token string
		code                int
	}{
		{"GET", "/ui/api/info", "", 401},
		{"GET", "/ui/api/info", "r-token-0123456789abcdef", 200},
		{"GET", "/ui/api/pipelines/gen", "r-token-0123456789abcdef", 200},
		{"POST", "/ui/api/dlq/gen/replay", "r-token-0123456789abcdef", 403},
		{"POST", "/ui/api/dlq/gen/replay", "w-token-0123456789abcdef", 404}, // allowed; gen has no DLQ
	} {
		if got := call(tt.method, tt.path, tt.token); got != tt.code {
			t.Errorf("%s %s with %q: %d, want %d", tt.method, tt.path, tt.token, got, tt.code)
		}
	}
}
