package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
)

// gatedLoader is a plugin loader for the loading tests: a plugin file
// named hang* never loads (its loader ignores its context, as a module
// whose start function loops does), slow* loads when the test releases
// it, bad* fails at once, and any other loads an identity transform.
type gatedLoader struct {
	slow    chan struct{} // closed: slow* loads
	forever chan struct{} // closed at the test's end
	mu      sync.Mutex
	calls   map[string]int
}

func newGatedLoader(t *testing.T) *gatedLoader {
	g := &gatedLoader{slow: make(chan struct{}), forever: make(chan struct{}), calls: map[string]int{}}
	t.Cleanup(func() { close(g.forever) })
	return g
}

func (g *gatedLoader) open(_ context.Context, ref string, _ plugins.Options) (plugins.Plugin, error) {
	name := filepath.Base(ref)
	g.mu.Lock()
	g.calls[name]++
	g.mu.Unlock()
	switch {
	case strings.HasPrefix(name, "hang"):
		<-g.forever
		return nil, errors.New("test over")
	case strings.HasPrefix(name, "slow"):
		<-g.slow
	case strings.HasPrefix(name, "bad"):
		return nil, fmt.Errorf("%s: not a streamd plugin (no streamd_abi_v1 export)", name)
	}
	return identity{}, nil
}

// genThrough is a generate -> transform(path) -> drop pipeline.
func genThrough(name, path string) string {
	return fmt.Sprintf(`
[[pipeline]]
name = %q
shutdown_timeout = "2s"
[pipeline.source]
type = "generate"
rate = 1000
[[pipeline.transform]]
type = "wasm"
path = %q
[pipeline.sink]
type = "drop"
`, name, path)
}

type readyzAnswer struct {
	Status    string            `json:"status"`
	Pipelines []string          `json:"pipelines"`
	Reasons   map[string]string `json:"reasons"`
}

// TestPipelinesLoadAfterTheListener: `streamd run` (app.New, then Run)
// opens the admin listener before it loads any plugin, and loads every
// pipeline's plugins at once, each within [plugins] load_timeout: a plugin
// that never loads (its loader ignoring its context), one that loads
// late, and one that fails to load delay and fail only their own
// pipelines. /healthz answers at once; /readyz, /pipelines and /v1/status
// show the pipelines loading, then failed with the cause; the healthy
// pipeline runs all along. Before, Build loaded the plugins one after
// another before the listener opened: a plugin that never loaded kept the
// listener closed and every pipeline stopped.
func TestPipelinesLoadAfterTheListener(t *testing.T) {
	b := testenv.Kafka(t)
	dir := t.TempDir()
	addr := freePort(t)
	src := fmt.Sprintf("data_dir = %q\n[kafka]\nbrokers = [%q]\n[admin]\nlisten = %q\n[plugins]\nload_timeout = \"2s\"\n", dir, b.Seeds[0], addr) +
		genThrough("good", "good.wasm") + genThrough("hang", "hang.wasm") + genThrough("slow", "slow.wasm") + genThrough("bad", "bad.wasm")
	cfg, err := config.Parse(filepath.Join(dir, "streamd.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	g := newGatedLoader(t)
	logs := testenv.LogFile(t, "streamd")
	testenv.TailOnFailure(t, logs.Name())
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, nil)), g.open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- a.Run(ctx) }()
	defer testenv.Close(t, context.Background(), a)

	get := func(path string, v any) int {
		t.Helper()
		c := http.Client{Timeout: time.Second}
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			return 0
		}
		defer testenv.Ignore(resp.Body.Close)
		if v != nil {
			if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return resp.StatusCode
	}
	for get("/healthz", nil) != http.StatusOK {
		if time.Since(started) > 5*time.Second {
			t.Fatal("/healthz does not answer 5s after Run started, while plugins load")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("/healthz answered %s after Run started", time.Since(started).Round(time.Millisecond))

	state := func(ps []app.PipelineStatus, name string) app.PipelineStatus {
		for _, p := range ps {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no pipeline %s in %+v", name, ps)
		return app.PipelineStatus{}
	}
	var st app.Status
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if get("/v1/status", &st) == http.StatusOK && state(st.Pipelines, "good").Out > 100 && state(st.Pipelines, "bad").State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the healthy pipeline does not run, or bad did not fail: %+v", st)
		}
	}
	for _, n := range []string{"hang", "slow"} {
		if p := state(st.Pipelines, n); p.State != app.StateLoading || !strings.Contains(p.Reason, "loading") {
			t.Fatalf("%s: %+v, want loading", n, p.Status)
		}
	}
	if p := state(st.Pipelines, "bad"); !strings.Contains(p.Error, "bad.wasm: not a streamd plugin") || !strings.Contains(p.Reason, "failed to load") {
		t.Fatalf("bad: %+v, want failed with the cause", p.Status)
	}
	var rz readyzAnswer
	if code := get("/readyz", &rz); code != http.StatusServiceUnavailable || !strings.Contains(rz.Reasons["hang"], "loading") ||
		!strings.Contains(rz.Reasons["bad"], "not a streamd plugin") || rz.Reasons["good"] != "" {
		t.Fatalf("/readyz %d %+v", code, rz)
	}
	var ps []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	}
	if get("/pipelines", &ps); fmt.Sprint(ps) != "[{good running} {hang loading} {slow loading} {bad failed}]" {
		t.Fatalf("/pipelines: %v", ps)
	}
	t.Logf("/readyz while loading: %+v", rz)

	close(g.slow)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		get("/v1/status", &st)
		if p := state(st.Pipelines, "slow"); p.State == "running" && p.Out > 0 && state(st.Pipelines, "hang").State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow does not run once its plugin loaded, or hang did not fail after its load timeout: %+v", st)
		}
	}
	if p := state(st.Pipelines, "hang"); !strings.Contains(p.Error, "did not load within 2s") {
		t.Fatalf("hang: %+v", p.Status)
	}
	if p := state(st.Pipelines, "good"); p.State != "running" || p.Restarts != 0 {
		t.Fatalf("good: %+v", p)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "bad.wasm") || !strings.Contains(err.Error(), "hang.wasm") {
			t.Fatalf("Run: %v, want the two load failures", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30s after its context was cancelled")
	}
}

// TestOnlyPipelineFailsToLoad: a daemon whose only pipeline's plugin does
// not load has ended its work: Run returns the load error (the process
// exits 1, and systemd restarts it), after the listener opened.
func TestOnlyPipelineFailsToLoad(t *testing.T) {
	b := testenv.Kafka(t)
	dir := t.TempDir()
	src := fmt.Sprintf("data_dir = %q\n[kafka]\nbrokers = [%q]\n[admin]\nlisten = %q\n", dir, b.Seeds[0], freePort(t)) + genThrough("p", "bad.wasm")
	cfg, err := config.Parse(filepath.Join(dir, "streamd.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler), newGatedLoader(t).open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), a)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Run(ctx); err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "bad.wasm: not a streamd plugin") {
		t.Fatalf("Run: %v (context: %v)", err, ctx.Err())
	}
}
