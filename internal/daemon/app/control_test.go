package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins/load"
)

// answerWithin bounds how long a control request may take to be answered
// on an idle daemon whose pipelines drain in well under a second.
const answerWithin = 10 * time.Second

// fileDaemon is a daemon run in process from a config file that the test
// rewrites before each reload.
type fileDaemon struct {
	t      *testing.T
	a      *app.App
	file   string
	head   string
	logs   *lockedWriter
	text   strings.Builder    // what logs wrote, read with logs' lock (logText)
	addr   string             // the admin listener's, if any
	cancel context.CancelFunc // stops the daemon
	done   chan struct{}      // closed when Run returned
	err    error              // what Run returned, once done is closed
}

// logText is the daemon's log so far.
func (d *fileDaemon) logText() string {
	d.logs.mu.Lock()
	defer d.logs.mu.Unlock()
	return d.text.String()
}

// adminAddr is the daemon's admin address.
func (d *fileDaemon) adminAddr() string { return d.addr }

// stop stops the daemon and returns what Run returned.
func (d *fileDaemon) stop() error {
	d.t.Helper()
	d.cancel()
	select {
	case <-d.done:
	case <-time.After(time.Minute):
		d.t.Fatal("Run did not return a minute after its context was cancelled")
	}
	return d.err
}

// daemonHead is what a test daemon's config file starts with.
type daemonHead struct {
	noAdmin bool   // no [admin] listen
	extra   string // more top-level sections
}

// startFileDaemon writes the head ([kafka] brokers of b, an [admin]
// listen) and body to a config file, builds it and runs it until the test
// ends.
func startFileDaemon(t *testing.T, b *testenv.Broker, body string, heads ...daemonHead) *fileDaemon {
	t.Helper()
	var h daemonHead
	if len(heads) > 0 {
		h = heads[0]
	}
	dir := t.TempDir()
	d := &fileDaemon{t: t, file: filepath.Join(dir, "streamd.toml"), logs: &lockedWriter{w: io.Discard}, done: make(chan struct{}),
		head: fmt.Sprintf("data_dir = %q\n[kafka]\nbrokers = [%q]\n", filepath.Join(dir, "data"), b.Seeds[0])}
	if !h.noAdmin {
		d.addr = freePort(t)
		d.head += fmt.Sprintf("[admin]\nlisten = %q\n", d.addr)
	}
	d.head += h.extra
	d.write(body)
	cfg, err := config.Load(d.file)
	if err != nil {
		t.Fatal(err)
	}
	logf := testenv.LogFile(t, "streamd")
	testenv.TailOnFailure(t, logf.Name())
	d.logs.w = io.MultiWriter(logf, &d.text)
	a, err := app.Build(context.Background(), cfg, slog.New(slog.NewTextHandler(d.logs, nil)), load.Open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d.a = a
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { d.err = a.Run(ctx); close(d.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.done:
		case <-time.After(time.Minute):
			t.Error("Run did not return a minute after its context was cancelled")
		}
		testenv.Close(t, context.Background(), a)
	})
	return d
}

func (d *fileDaemon) write(body string) {
	d.t.Helper()
	if err := os.WriteFile(d.file, []byte(d.head+body), 0o644); err != nil {
		d.t.Fatal(err)
	}
}

// waitState waits until pipeline name is in state.
func (d *fileDaemon) waitState(name, state string) app.PipelineStatus {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, p := range d.a.Status().Pipelines {
			if p.Name == name && string(p.State) == state {
				return p
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("pipeline %s not %s after 30s: %+v", name, state, d.a.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// within runs f and fails the test if it does not return within
// answerWithin; what names the request.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(answerWithin):
		t.Fatalf("%s: no answer within %v (the daemon stopped taking control)", what, answerWithin)
	}
	panic("unreachable")
}

type reloadAnswer struct {
	res app.ReloadResult
	err error
}

func (d *fileDaemon) reload(what string) reloadAnswer {
	d.t.Helper()
	return within(d.t, what, func() reloadAnswer {
		res, err := d.a.Reload(context.Background())
		return reloadAnswer{res, err}
	})
}

// running fails the test if Run has returned.
func (d *fileDaemon) running(when string) {
	d.t.Helper()
	select {
	case <-d.done:
		d.t.Fatalf("%s: the daemon exited (Run returned %v)", when, d.err)
	default:
	}
}

// genPipeline is a generate -> drop pipeline; batch tells one version of
// it from another.
func genPipeline(name string, batch int) string {
	return fmt.Sprintf(`
[[pipeline]]
name = %q
shutdown_timeout = "5s"
[pipeline.batch]
max_records = %d
[pipeline.source]
type = "generate"
rate = 2000
[pipeline.sink]
type = "drop"
`, name, batch)
}

// TestOnePipelineKeepsObeying: a daemon that runs ONE pipeline answers
// every control request within a bound after a reload that changed that
// pipeline: a second reload, a broken file (refused with FILE:LINE), a
// third reload, pause, resume, restart and a reload after the restart.
// Before, the first reload's stop of the only pipeline looked to Run like
// "every pipeline ended"; Run then waited for the new pipeline while
// holding the controls' lock, and every later request hung.
func TestOnePipelineKeepsObeying(t *testing.T) {
	d := startFileDaemon(t, testenv.Kafka(t), genPipeline("p", 100))
	d.waitState("p", "running")
	changed := func(what string, batch int) {
		t.Helper()
		d.write(genPipeline("p", batch))
		r := d.reload(what)
		if r.err != nil || !r.res.OK || fmt.Sprint(r.res.Changed) != "[p]" {
			t.Fatalf("%s: %+v %v, want p changed", what, r.res, r.err)
		}
		d.running(what)
	}
	changed("first reload", 200)
	changed("second reload", 300)

	broken := strings.Replace(genPipeline("p", 400), "rate = 2000", "rtae = 2000", 1)
	d.write(broken)
	line := strings.Count(d.head+broken[:strings.Index(broken, "rtae")], "\n") + 1
	r := d.reload("reload of a broken file")
	if where := fmt.Sprintf("%s:%d:", d.file, line); r.err == nil || r.res.OK || !strings.Contains(r.res.Error, where) {
		t.Fatalf("broken file: %+v %v, want refused at %s", r.res, r.err, where)
	}
	if st := d.a.Status(); st.ReloadError == "" || len(st.Pipelines) != 1 || st.Pipelines[0].Restarts != 2 {
		t.Fatalf("after the refused reload: %+v", st)
	}
	changed("reload after the broken file", 500)

	ctl := func(what string, f func() (bool, error), want bool) {
		t.Helper()
		type answer struct {
			changed bool
			err     error
		}
		a := within(t, what, func() answer { c, err := f(); return answer{c, err} })
		if a.err != nil || a.changed != want {
			t.Fatalf("%s: %v %v, want %v", what, a.changed, a.err, want)
		}
	}
	ctl("pause", func() (bool, error) { return d.a.Pause("p") }, true)
	ctl("resume", func() (bool, error) { return d.a.Resume("p") }, true)
	if err := within(t, "restart", func() error { return d.a.Restart(context.Background(), "p") }); err != nil {
		t.Fatalf("restart: %v", err)
	}
	d.running("restart")
	ctl("pause after the restart", func() (bool, error) { return d.a.Pause("p") }, true)
	ctl("resume after the restart", func() (bool, error) { return d.a.Resume("p") }, true)
	changed("reload after the restart", 600)
	if p := d.waitState("p", "running"); p.Restarts != 5 {
		t.Fatalf("at the end: %+v", p)
	}
}

// TestOnePipelineRestartThenControls: `ctl restart` of the only pipeline,
// then pause, resume and reload, each answered within a bound; five
// rounds (the window was narrow).
func TestOnePipelineRestartThenControls(t *testing.T) {
	d := startFileDaemon(t, testenv.Kafka(t), genPipeline("p", 100))
	d.waitState("p", "running")
	for i := range 5 {
		if err := within(t, "restart", func() error { return d.a.Restart(context.Background(), "p") }); err != nil {
			t.Fatalf("round %d: restart: %v", i, err)
		}
		for _, c := range []struct {
			what string
			f    func(string) (bool, error)
		}{{"pause", d.a.Pause}, {"resume", d.a.Resume}} {
			if err := within(t, c.what+" after a restart", func() error { _, err := c.f("p"); return err }); err != nil {
				t.Fatalf("round %d: %s after a restart: %v", i, c.what, err)
			}
		}
		d.write(genPipeline("p", 200+i))
		if r := d.reload("reload after a restart"); r.err != nil || !r.res.OK {
			t.Fatalf("round %d: reload after a restart: %+v %v", i, r.res, r.err)
		}
		d.running("reload after a restart")
	}
}

// TestRemoveLastPipeline: a reload that removes the only pipeline of a
// daemon that has the journal (a config may then have no pipeline) leaves
// a daemon with none, which keeps running and answering (a later reload
// adds one); it exits only when stopped. Before, with no [admin] listen,
// the daemon exited 0 once the reload had removed its last pipeline.
func TestRemoveLastPipeline(t *testing.T) {
	store := "sqlite:" + filepath.Join(t.TempDir(), "journal.db")
	d := startFileDaemon(t, testenv.Kafka(t), genPipeline("p", 100), daemonHead{noAdmin: true, extra: fmt.Sprintf("[journal]\nstore = %q\n", store)})
	// The window is narrow: try it a few times.
	for i := range 10 {
		d.write("")
		r := d.reload("reload removing the only pipeline")
		if r.err != nil || fmt.Sprint(r.res.Removed) != "[p]" {
			t.Fatalf("%+v %v", r.res, r.err)
		}
		time.Sleep(100 * time.Millisecond)
		d.running(fmt.Sprintf("round %d: after the last pipeline was removed", i))
		d.write(genPipeline("p", 100))
		r = d.reload("reload adding it again")
		if r.err != nil || fmt.Sprint(r.res.Added) != "[p]" {
			t.Fatalf("%+v %v", r.res, r.err)
		}
		d.running(fmt.Sprintf("round %d: after a pipeline was added again", i))
	}
	if err := within(t, "pause", func() error { _, err := d.a.Pause("p"); return err }); err != nil {
		t.Fatal(err)
	}
}

// TestOnePipelineAutoRestartAfterReload: an exactly-once daemon with one
// pipeline, reloaded (the pipeline changed), whose pipeline then fails
// inside a transaction (its sink topic deleted): the pipeline starts again
// by itself with the reloaded config and the daemon goes on. Before, Run
// was waiting for the reloaded pipeline to end, took its failure for the
// daemon's end and returned it: the daemon exited 1.
func TestOnePipelineAutoRestartAfterReload(t *testing.T) {
	b := testenv.Kafka(t)
	in, out := testenv.Topic(t, "in"), testenv.Topic(t, "out")
	b.CreateTopic(t, in, 2)
	b.CreateTopic(t, out, 2)
	group := testenv.Topic(t, "g")
	body := func(batch int) string {
		return fmt.Sprintf(`
[[pipeline]]
name = "eo"
delivery = "exactly-once"
shutdown_timeout = "5s"
[pipeline.batch]
max_records = %d
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[pipeline.sink]
type = "kafka"
topic = %q
`, batch, in, group, out)
	}
	d := startFileDaemon(t, b, body(100))
	pcl := b.Client(t)
	produceN(t, pcl, in, "a", 100)
	d.waitState("eo", "running")
	d.write(body(200))
	if r := d.reload("reload"); r.err != nil || fmt.Sprint(r.res.Changed) != "[eo]" {
		t.Fatalf("reload: %+v %v", r.res, r.err)
	}
	produceN(t, pcl, in, "b", 100)
	if got := readCommitted(t, b, out, "b", 100, time.Minute); len(got) < 100 {
		t.Fatalf("after the reload: %d records", len(got))
	}
	adm := kadm.NewClient(b.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := adm.DeleteTopic(ctx, out); err != nil || resp.Err != nil {
		t.Fatalf("delete %s: %v %v", out, err, resp.Err)
	}
	produceN(t, pcl, in, "c", 100)
	deadline := time.Now().Add(time.Minute)
	for {
		d.running("after the pipeline failed inside a transaction")
		st := d.a.Status()
		if p := st.Pipelines[0]; p.AutoRestarts > 0 && p.State == "running" {
			t.Logf("auto restarts %d, restarts %d: %s", p.AutoRestarts, p.Restarts, p.LastRestartCause)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no automatic restart a minute after the sink topic was deleted: %+v", st.Pipelines[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := readCommitted(t, b, out, "c", 100, time.Minute); len(got) < 100 {
		t.Fatalf("after the automatic restart: %d of 100 records", len(got))
	}
	d.write(body(300))
	if r := d.reload("reload after the automatic restart"); r.err != nil || !r.res.OK {
		t.Fatalf("reload after the automatic restart: %+v %v", r.res, r.err)
	}
}
