package console_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/admin"
	"github.com/streamd/streamd/internal/daemon/console"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// openStreams opens n GET path streams (with token, if not "") and
// returns the responses accepted (status 200) and how many were refused
// with 429; the accepted ones are closed when the test ends.
func openStreams(t *testing.T, base, path, token string, n int) (ok []*http.Response, refused int) {
	t.Helper()
	for range n {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		switch res.StatusCode {
		case http.StatusOK:
			ok = append(ok, res)
			t.Cleanup(func() { _ = res.Body.Close() })
		case http.StatusTooManyRequests:
			refused++
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if !strings.Contains(string(b), "max_streams") {
				t.Errorf("429 without saying which limit: %s", b)
			}
		default:
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			t.Fatalf("GET %s: %s %s", path, res.Status, b)
		}
	}
	return ok, refused
}

// TestEventStreamsBounded: event streams count against the admin
// server's limit (64 by default): past it they are refused with 429, and
// one token gets at most its share (16 by default), so a read token
// cannot take them all.
func TestEventStreamsBounded(t *testing.T) {
	p := runPipeline(t, "gen", 10)
	c := console.New(console.WithPipelines(func() []console.Pipeline { return []console.Pipeline{{Name: "gen", P: p}} }))
	base := serve(t, c)
	c.Start()
	defer testenv.Close(t, context.Background(), c)
	ok, refused := openStreams(t, base, "/ui/api/events", "", 80)
	if len(ok) != admin.DefaultMaxStreams || refused != 80-admin.DefaultMaxStreams {
		t.Errorf("80 event streams: %d accepted, %d refused; want %d accepted", len(ok), refused, admin.DefaultMaxStreams)
	}
	for _, res := range ok {
		_ = res.Body.Close()
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	if err := os.WriteFile(file, []byte("read grafana r-token-0123456789abcdef\nread viewer v-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := admin.LoadTokens(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2 := console.New(console.WithPipelines(func() []console.Pipeline { return []console.Pipeline{{Name: "gen", P: p}} }))
	base2 := serve(t, c2, admin.WithTokens(toks))
	c2.Start()
	defer testenv.Close(t, context.Background(), c2)
	ok, refused = openStreams(t, base2, "/ui/api/events", "r-token-0123456789abcdef", 20)
	if len(ok) != admin.DefaultMaxStreamsPerToken || refused != 20-admin.DefaultMaxStreamsPerToken {
		t.Errorf("20 event streams of one token: %d accepted, %d refused; want %d accepted", len(ok), refused, admin.DefaultMaxStreamsPerToken)
	}
	if ok2, _ := openStreams(t, base2, "/ui/api/events", "v-token-0123456789abcdef", 1); len(ok2) != 1 {
		t.Errorf("another token's stream was refused while the first token is at its share")
	}
}

// streamEnd reads res until it ends and reports when.
func streamEnd(res *http.Response) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, res.Body)
		ch <- time.Now()
	}()
	return ch
}

// TestStreamsEndWhenTokenRevoked: an open tap and an event stream of a
// read token end within a second of the token's removal from the tokens
// file, while another token's go on; when the tokens file is deleted,
// the other token's end too.
func TestStreamsEndWhenTokenRevoked(t *testing.T) {
	p := runPipeline(t, "p", 10)
	c := console.New(console.WithPipelines(func() []console.Pipeline {
		return []console.Pipeline{{Name: "p", P: p, Stages: []console.Stage{{Name: "upper", Type: "wasm"}}}}
	}), console.WithSampling(100*time.Millisecond, time.Minute))
	obs := c.Observer("p", []string{"upper"})
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	const gone, stays = "g-token-0123456789abcdef", "s-token-0123456789abcdef"
	if err := os.WriteFile(file, []byte("read gone "+gone+"\nread stays "+stays+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := admin.LoadTokens(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, c, admin.WithTokens(toks), admin.WithTimeouts(admin.Timeouts{Write: time.Minute}))
	c.Start()
	defer testenv.Close(t, context.Background(), c)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); feed(ctx, obs) }()
	defer func() { cancel(); wg.Wait() }()

	open := func(path, token string) *http.Response {
		ok, _ := openStreams(t, base, path, token, 1)
		if len(ok) != 1 {
			t.Fatalf("GET %s refused", path)
		}
		return ok[0]
	}
	goneTap, goneEvents := streamEnd(open("/ui/api/tap/p/upper", gone)), streamEnd(open("/ui/api/events", gone))
	staysEvents := streamEnd(open("/ui/api/events", stays))
	var records atomic.Int64
	staysTap := open("/ui/api/tap/p/upper", stays)
	staysTapEnd := make(chan time.Time, 1)
	go func() {
		for ev := range readEvents(staysTap.Body) {
			if ev.name == "record" {
				records.Add(1)
			}
		}
		staysTapEnd <- time.Now()
	}()
	time.Sleep(500 * time.Millisecond)

	// Revoke "gone": its tap and events end within a second.
	revoked := time.Now()
	if err := os.WriteFile(file, []byte("read stays "+stays+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan time.Time{"tap": goneTap, "events": goneEvents} {
		select {
		case at := <-ch:
			if d := at.Sub(revoked); d > time.Second {
				t.Errorf("the revoked token's %s ended %s after the revocation, want within 1 s", name, d.Round(time.Millisecond))
			}
		case <-time.After(5 * time.Second):
			t.Errorf("the revoked token's %s still runs 5 s after the revocation", name)
		}
	}
	select {
	case <-staysEvents:
		t.Fatal("the other token's event stream ended")
	case <-staysTapEnd:
		t.Fatal("the other token's tap ended")
	case <-time.After(time.Second):
	}
	if records.Load() == 0 {
		t.Fatal("the other token's tap sent no record")
	}

	// The tokens file disappears: every token is refused, the streams end.
	deleted := time.Now()
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan time.Time{"tap": staysTapEnd, "events": staysEvents} {
		select {
		case at := <-ch:
			if d := at.Sub(deleted); d > time.Second {
				t.Errorf("with the tokens file gone, the %s ended after %s, want within 1 s", name, d.Round(time.Millisecond))
			}
		case <-time.After(5 * time.Second):
			t.Errorf("with the tokens file gone, the %s still runs after 5 s", name)
		}
	}
}

// TestEventsEncodedOncePerTick: with many event streams open, a tick is
// built once and sent to all of them, not built again for each stream
// (which looked at every pipeline's status once per stream per second).
// The pipelines are looked at by the sampling, once a tick, and by the
// tick's event, once a tick, plus once for each stream's first event.
func TestEventsEncodedOncePerTick(t *testing.T) {
	p := runPipeline(t, "gen", 10)
	var looks atomic.Int64
	c := console.New(console.WithPipelines(func() []console.Pipeline {
		looks.Add(1)
		return []console.Pipeline{{Name: "gen", P: p}}
	}), console.WithSampling(100*time.Millisecond, time.Minute))
	base := serve(t, c, admin.WithTimeouts(admin.Timeouts{Write: time.Minute}))
	c.Start()
	defer testenv.Close(t, context.Background(), c)
	const streams = 20
	var ticks atomic.Int64
	for range streams {
		ok, _ := openStreams(t, base, "/ui/api/events", "", 1)
		go func() {
			for ev := range readEvents(ok[0].Body) {
				if ev.name == "tick" {
					ticks.Add(1)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // every stream sent its hello
	before, ticks0 := looks.Load(), ticks.Load()
	time.Sleep(2 * time.Second)
	n, sent := looks.Load()-before, ticks.Load()-ticks0
	// About 20 ticks in 2 s: 2 looks a tick, with slack for timing.
	t.Logf("%d streams, 2 s: %d tick events sent, the pipelines looked at %d times", streams, sent, n)
	if sent < streams*10 {
		t.Fatalf("only %d tick events reached %d streams in 2 s", sent, streams)
	}
	if n > 2*25 {
		t.Fatalf("the pipelines were looked at %d times in 2 s with %d streams: the tick is built again per stream", n, streams)
	}
}

// openFDs is how many file descriptors this process has open.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

// TestEventStreamFlood: many event-stream attempts, each on a connection
// of its own that the client leaves open, against a server with a small
// limit: the first limit are served, every other one gets 429 and the
// server closes its connection (the process's file descriptors do not
// grow with the attempts), and /healthz answers quickly all along. (By
// hand with 5,000 attempts and the daemon's RSS: docs/operations.md,
// "Securing the admin listener".)
func TestEventStreamFlood(t *testing.T) {
	const limit, attempts = 8, 1000
	p := runPipeline(t, "gen", 10)
	c := console.New(console.WithPipelines(func() []console.Pipeline { return []console.Pipeline{{Name: "gen", P: p}} }))
	base := serve(t, c, admin.WithStreamLimits(limit, limit), admin.WithTimeouts(admin.Timeouts{Write: time.Minute}))
	c.Start()
	defer testenv.Close(t, context.Background(), c)
	addr := strings.TrimPrefix(base, "http://")
	fds0 := openFDs(t)
	var kept []net.Conn
	refused := 0
	var worst time.Duration
	health := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range attempts {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if _, err := fmt.Fprintf(conn, "GET /ui/api/events HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(conn)
		status, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		switch {
		case strings.HasPrefix(status, "HTTP/1.1 200"):
			kept = append(kept, conn)
		case strings.HasPrefix(status, "HTTP/1.1 429"):
			refused++
			// The server closes the connection after its answer: the
			// client, which does not close it, reads to the end.
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Fatalf("attempt %d: the refused connection was not closed by the server: %v", i, err)
			}
			_ = conn.Close()
		default:
			t.Fatalf("attempt %d: %q", i, status)
		}
		if i%100 == 99 {
			start := time.Now()
			hr, err := health.Get(base + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			_ = hr.Body.Close()
			worst = max(worst, time.Since(start))
		}
	}
	time.Sleep(200 * time.Millisecond)
	fds := openFDs(t)
	t.Logf("%d attempts: %d served, %d refused (429); fds %d -> %d; /healthz at worst %s", attempts, len(kept), refused, fds0, fds, worst)
	if len(kept) != limit || refused != attempts-limit {
		t.Fatalf("%d served, %d refused; want %d served", len(kept), refused, limit)
	}
	// The streams kept open hold two descriptors each here (client and
	// server ends, one process); the refused ones hold none.
	if fds > fds0+2*limit+20 {
		t.Fatalf("file descriptors %d -> %d after %d attempts: refused connections stay open", fds0, fds, attempts)
	}
	if worst > 50*time.Millisecond {
		t.Errorf("/healthz took %s during the flood", worst)
	}
	for _, conn := range kept {
		_ = conn.Close()
	}
}
