package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// The "one of something" windows of the lifecycle: a daemon that runs
// only the fluid bridge or only the journal, a pipeline controlled while
// it loads, requests during the daemon's start.

// fluidMeta writes a one-version [fluid] metadata folder (examples/fluid's
// v1) and returns it.
func fluidMeta(t *testing.T) string {
	t.Helper()
	meta := filepath.Join(t.TempDir(), ".fluid")
	v1 := filepath.Join(meta, "v1")
	if err := os.MkdirAll(v1, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"manifest.json", "orders.schema.json"} {
		b, err := os.ReadFile(filepath.Join(testenv.Root(), "examples", "fluid", ".fluid", "v1", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(v1, f), string(b))
	}
	return meta
}

// fluidConsumer is a Fluid Messaging consumer pipeline of topic through
// this process's bridge.
func fluidConsumer(name, topic, group string, batch int) string {
	return fmt.Sprintf(`
[[pipeline]]
name = %q
shutdown_timeout = "5s"
[pipeline.batch]
max_records = %d
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[pipeline.source.fluid]
compatible_version = 1
[pipeline.sink]
type = "drop"
`, name, batch, topic, group)
}

// TestFluidBridgeAlone: a daemon that serves only the fluid bridge (no
// pipeline) answers on /fluid/ from its start, takes a reload that adds
// a fluid consumer of its own bridge, pause, resume, restart and a reload
// that changes it, then one that removes it again: it keeps running with
// none, and ends cleanly (nil) on a stop, its consumer drained before the
// bridge closes.
func TestFluidBridgeAlone(t *testing.T) {
	b := testenv.Kafka(t)
	topic := testenv.Topic(t, "orders")
	b.CreateTopic(t, topic, 2)
	meta := fluidMeta(t)
	// The manifest names "orders": the consumer's topic must be that.
	writeFile(t, filepath.Join(meta, "v1", "manifest.json"), fmt.Sprintf(`{"version": 1, "topics": {%q: {"schema": "orders.schema.json"}}}`, topic))
	d := startFileDaemon(t, b, "", daemonHead{extra: fmt.Sprintf("[fluid]\nmetadata = %q\nstate_topic = %q\n", meta, testenv.Topic(t, "fluid-state"))})
	addr := d.adminAddr()
	compatible := fmt.Sprintf("http://%s/fluid/compatible?topic=%s&observed-schema-version=1&compatible-schema-version=1", addr, topic)
	waitHTTP(t, compatible, http.StatusOK)
	group := testenv.Topic(t, "g")
	d.write(fluidConsumer("c", topic, group, 100))
	if r := d.reload("reload adding a fluid consumer"); r.err != nil || fmt.Sprint(r.res.Added) != "[c]" {
		t.Fatalf("%+v %v", r.res, r.err)
	}
	d.waitState("c", "running")
	for _, f := range []func(string) (bool, error){d.a.Pause, d.a.Resume} {
		if err := within(t, "pause/resume", func() error { _, err := f("c"); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := within(t, "restart", func() error { return d.a.Restart(context.Background(), "c") }); err != nil {
		t.Fatal(err)
	}
	d.write(fluidConsumer("c", topic, group, 200))
	if r := d.reload("reload changing it"); r.err != nil || fmt.Sprint(r.res.Changed) != "[c]" {
		t.Fatalf("%+v %v", r.res, r.err)
	}
	d.waitState("c", "running")
	d.write("")
	if r := d.reload("reload removing it"); r.err != nil || fmt.Sprint(r.res.Removed) != "[c]" {
		t.Fatalf("%+v %v", r.res, r.err)
	}
	time.Sleep(200 * time.Millisecond)
	d.running("with no pipeline left")
	waitHTTP(t, compatible, http.StatusOK)
	d.write(fluidConsumer("c", topic, group, 300))
	if r := d.reload("reload adding it again"); r.err != nil || fmt.Sprint(r.res.Added) != "[c]" {
		t.Fatalf("%+v %v", r.res, r.err)
	}
	d.waitState("c", "running")
	if err := d.stop(); err != nil {
		t.Fatalf("Run after a stop: %v", err)
	}
	if l := d.logText(); strings.Contains(l, "level=ERROR") {
		t.Fatalf("errors logged by a clean stop:\n%s", l)
	}
}

// TestJournalAlone: a daemon that serves only the journal API answers on
// /journal/ from its start; a reload that adds a journal pipeline
// reports it restart-only and changes nothing; one that adds and then
// removes a plain pipeline leaves the daemon running. With one journal
// pipeline, `ctl restart` is refused at once with the reason, pause and
// resume work, and a reload that changes it is reported restart-only.
func TestJournalAlone(t *testing.T) {
	b := testenv.Kafka(t)
	store := "sqlite:" + filepath.Join(t.TempDir(), "journal.db")
	in := testenv.Topic(t, "journal")
	b.CreateTopic(t, in, 1)
	journalPipeline := func(batch int) string {
		return fmt.Sprintf("\n[[pipeline]]\nname = \"replicate\"\n[pipeline.batch]\nmax_records = %d\n[pipeline.source]\ntype = \"kafka\"\ntopics = [%q]\ngroup = %q\n[pipeline.sink]\ntype = \"journal\"\n",
			batch, in, in+"-g")
	}
	head := daemonHead{extra: fmt.Sprintf("[journal]\nstore = %q\n", store)}
	t.Run("no pipeline", func(t *testing.T) {
		d := startFileDaemon(t, b, "", head)
		waitHTTP(t, "http://"+d.adminAddr()+"/journal/journals/nope", http.StatusNotFound)
		d.write(journalPipeline(100))
		if r := d.reload("reload adding a journal pipeline"); r.err != nil || len(r.res.Added) != 0 || !strings.Contains(fmt.Sprint(r.res.RestartOnly), "added only with a restart") {
			t.Fatalf("%+v %v", r.res, r.err)
		}
		d.write(genPipeline("p", 100))
		if r := d.reload("reload adding a pipeline"); r.err != nil || fmt.Sprint(r.res.Added) != "[p]" {
			t.Fatalf("%+v %v", r.res, r.err)
		}
		d.write("")
		if r := d.reload("reload removing it"); r.err != nil || fmt.Sprint(r.res.Removed) != "[p]" {
			t.Fatalf("%+v %v", r.res, r.err)
		}
		time.Sleep(200 * time.Millisecond)
		d.running("with no pipeline left")
		if err := d.stop(); err != nil {
			t.Fatalf("Run after a stop: %v", err)
		}
	})
	t.Run("one journal pipeline", func(t *testing.T) {
		d := startFileDaemon(t, b, journalPipeline(100), head)
		d.waitState("replicate", "running")
		err := within(t, "restart", func() error { return d.a.Restart(context.Background(), "replicate") })
		if err == nil || !strings.Contains(err.Error(), "restarts only with the daemon") {
			t.Fatalf("restart of the journal pipeline: %v", err)
		}
		for _, f := range []func(string) (bool, error){d.a.Pause, d.a.Resume} {
			if c := within(t, "pause/resume", func() ctlAnswer { c, err := f("replicate"); return ctlAnswer{c, err} }); !c.changed || c.err != nil {
				t.Fatalf("pause/resume: %+v", c)
			}
		}
		d.write(journalPipeline(200))
		if r := d.reload("reload changing it"); r.err != nil || !strings.Contains(fmt.Sprint(r.res.RestartOnly), "change only with a restart") {
			t.Fatalf("%+v %v", r.res, r.err)
		}
		if p := d.waitState("replicate", "running"); p.Restarts != 0 {
			t.Fatalf("the journal pipeline was touched: %+v", p)
		}
		if err := d.stop(); err != nil {
			t.Fatalf("Run after a stop: %v", err)
		}
	})
}

// TestControlWhileLoading: requests that come while the daemon starts
// and its only pipeline's plugin loads are answered: a pause holds (the
// pipeline starts paused), a restart and a reload wait in line until the
// pipeline is launched and then run (the restart builds it again, ending
// the load in progress); a request whose deadline passes in line is
// answered ErrBusy and dropped. Before, a restart that came before Run
// had started the pipelines replaced a unit that Run then never started.
func TestControlWhileLoading(t *testing.T) {
	b := testenv.Kafka(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "streamd.toml")
	body := func(batch int) string {
		return fmt.Sprintf("data_dir = %q\n[kafka]\nbrokers = [%q]\n", dir, b.Seeds[0]) +
			strings.Replace(genThrough("p", "slow.wasm"), "[pipeline.source]", fmt.Sprintf("[pipeline.batch]\nmax_records = %d\n[pipeline.source]", batch), 1)
	}
	writeFile(t, file, body(100))
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	g := newGatedLoader(t)
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), g.open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), a)
	// Before Run: a reload waits in line, and its deadline passes.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	if _, err := a.Reload(ctx); !errors.Is(err, app.ErrBusy) {
		t.Fatalf("reload before Run with a 100ms deadline: %v, want ErrBusy", err)
	}
	cancel()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	for a.Status().Pipelines[0].State != app.StateLoading || !strings.Contains(a.Status().Pipelines[0].Reason, "loading") {
		time.Sleep(5 * time.Millisecond)
	}
	if c := within(t, "pause while loading", func() ctlAnswer { c, err := a.Pause("p"); return ctlAnswer{c, err} }); !c.changed || c.err != nil {
		t.Fatalf("pause while loading: %+v", c)
	}
	// A restart and a reload (the file changed) while the plugin loads:
	// they wait in line, each within its bound, for the launched
	// pipeline.
	restarted := make(chan error, 1)
	go func() { restarted <- a.Restart(context.Background(), "p") }()
	writeFile(t, file, body(200))
	reloaded := make(chan reloadAnswer, 1)
	go func() { r, err := a.Reload(context.Background()); reloaded <- reloadAnswer{r, err} }()
	time.Sleep(200 * time.Millisecond)
	if p := a.Status().Pipelines[0]; p.State != app.StateLoading || p.Restarts != 0 {
		t.Fatalf("while its plugin loads: %+v", p)
	}
	close(g.slow)
	select {
	case err := <-restarted:
		if err != nil {
			t.Fatalf("restart while loading: %v", err)
		}
	case <-time.After(answerWithin):
		t.Fatal("restart while loading: no answer once the plugin loaded")
	}
	select {
	case r := <-reloaded:
		if r.err != nil || fmt.Sprint(r.res.Changed) != "[p]" {
			t.Fatalf("reload while loading: %+v %v", r.res, r.err)
		}
	case <-time.After(answerWithin):
		t.Fatal("reload while loading: no answer once the plugin loaded")
	}
	for deadline := time.Now().Add(answerWithin); ; time.Sleep(10 * time.Millisecond) {
		p := a.Status().Pipelines[0]
		if p.State == "running" && p.Paused && p.Restarts == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart and the reload: %+v, want running, paused, restarted twice", p)
		}
	}
	if g.calls["slow.wasm"] != 3 {
		t.Fatalf("the plugin was loaded %d times, want 3 (the start, the restart, the reload)", g.calls["slow.wasm"])
	}
}

// waitHTTP waits until GET url answers code.
func waitHTTP(t *testing.T, url string, code int) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == code {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v %v, want %d", url, resp, err, code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
