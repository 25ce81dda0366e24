package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins/load"
)

// freePort returns a loopback address nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(ln.Close)
	return ln.Addr().String()
}

// TestAdminAuthJournal, on the daemon: the journal API
// mounted on the admin server answers 401 without a token; with a read
// token, reads work and a purge is 403 (and purges nothing); with a write
// token the purge works.
func TestAdminAuthJournal(t *testing.T) {
	b := testenv.Kafka(t)
	topic := testenv.Topic(t, "journal")
	b.CreateTopic(t, topic, 1)
	dir := t.TempDir()
	readTok, writeTok := "read-token-0123456789abcdef", "write-token-0123456789abcdef"
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("read dashboard "+readTok+"\nwrite operator "+writeTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	src := fmt.Sprintf(`
[kafka]
brokers = [%q]
[admin]
listen = %q
[admin.auth]
tokens_file = %q
[journal]
store = "sqlite:%s"
`, b.Seeds[0], addr, tokens, filepath.Join(dir, "journal.db"))
	cfg, err := config.Parse(filepath.Join(dir, "streamd.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedWriter{w: &strings.Builder{}}
	a, err := app.Build(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)), load.Open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		testenv.Close(t, context.Background(), a)
	}()
	base := "http://" + addr + "/journal/" + topic + "/order-1"
	call := func(method, url, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/x-ndjson")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer testenv.Ignore(resp.Body.Close)
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK) // the journal is open
	if code, body := call("POST", base, "", `{"seqNr":1,"payload":{"a":1}}`); code != 401 || !strings.Contains(body, "missing bearer token") {
		t.Fatalf("append without a token: %d %s", code, body)
	}
	if code, body := call("POST", base, writeTok, `{"seqNr":1,"payload":{"a":1}}`); code != 200 {
		t.Fatalf("append with a write token: %d %s", code, body)
	}
	if code, body := call("POST", base+"/purge", readTok, ""); code != 403 || !strings.Contains(body, "role write needed") {
		t.Fatalf("purge with a read token: %d %s, want 403", code, body)
	}
	if code, body := call("GET", base+"/pointer", readTok, ""); code != 200 || !strings.Contains(body, `"seqNr": 1`) && !strings.Contains(body, `"seqNr":1`) {
		t.Fatalf("pointer after the refused purge: %d %s, want seqNr 1", code, body)
	}
	if code, body := call("POST", base+"/purge", writeTok, ""); code != 200 {
		t.Fatalf("purge with a write token: %d %s", code, body)
	}
	if code, body := call("GET", base+"/pointer", readTok, ""); code != 200 || !strings.Contains(body, "null") {
		t.Fatalf("pointer after the purge: %d %s, want null", code, body)
	}
	for _, tok := range []string{readTok, writeTok} {
		if strings.Contains(logs.String(), tok) {
			t.Fatalf("a token is in the daemon's log:\n%s", logs.String())
		}
	}
}

// lockedWriter serializes writes to w (a daemon logs from many goroutines).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// String returns what was written, when w is a strings.Builder.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.(fmt.Stringer).String()
}

// TestFluidBridgeToken: a fluid consumer of another process's bridge
// sends source.fluid.bridge_token (read from its file at each request) as
// a bearer token; it never appears in the log.
func TestFluidBridgeToken(t *testing.T) {
	b := testenv.Kafka(t)
	tok := testenv.Secret(t, "bridge token")
	var mu sync.Mutex
	var got []string
	bridge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, `{"error":"test bridge"}`, http.StatusServiceUnavailable)
	}))
	defer bridge.Close()
	dir := t.TempDir()
	tf := filepath.Join(dir, "bridge-token")
	if err := os.WriteFile(tf, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`[kafka]
brokers = [%q]
[[pipeline]]
name = "v1"
[pipeline.source]
type = "kafka"
topics = ["orders"]
group = "v1"
[pipeline.source.fluid]
compatible_version = 1
bridge = %q
bridge_token = "${file:%s}"
[pipeline.sink]
type = "drop"
`, b.Seeds[0], bridge.URL, tf)
	cfg, err := config.Parse(filepath.Join(dir, "streamd.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedWriter{w: &strings.Builder{}}
	a, err := app.Build(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)), load.Open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	testenv.Close(t, context.Background(), a)
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || got[0] != "Bearer "+tok {
		t.Fatalf("the bridge got Authorization %q, want the token", got)
	}
	if strings.Contains(logs.String(), tok) {
		t.Fatalf("the token is in the log:\n%s", logs.String())
	}
}
