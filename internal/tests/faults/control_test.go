package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// controlAfterReload: a daemon that runs ONE exactly-once pipeline (the
// usual deployment) is reloaded by SIGHUP with a change to that pipeline
// and restarted by `streamd ctl restart`; then pause, resume and reload
// must each answer within a second; then the broker is restarted under an
// open transaction: the pipeline must start again by itself (the daemon
// must not exit), and a read_committed reader must see every record once.
// Before, such a daemon stopped taking control after the reload, and the
// broker restart made it exit 1.
func controlAfterReload(t *testing.T) {
	e := newEnv(t, wholeBroker)
	r := newRun(t, e)
	prod := r.producer(nil, nil)
	pp := &pipe{role: "eo", policy: "stop", name: "orders", group: r.prefix + "-eo", out: r.prefix + "-eo-out"}
	e.createTopic(pp.out)
	cfg := filepath.Join(t.TempDir(), "eo.toml")
	write := func(batch int) {
		t.Helper()
		text := fmt.Sprintf(`data_dir = %q
[log]
level = "info"
[admin]
listen = "127.0.0.1:0"
[kafka]
brokers = [%s]
partitions = 4
[[pipeline]]
name = %q
delivery = "exactly-once"
max_in_flight = %d
shutdown_timeout = %q
stall_timeout = %q
[pipeline.transaction]
interval = "2s"
[pipeline.batch]
max_records = %d
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[pipeline.sink]
type = "kafka"
topic = %q
`, t.TempDir(), quoteList(e.seeds), pp.name, maxInFlight, shutdownTimeout, stallTimeout, batch, r.in, pp.group, pp.out)
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(500)
	d, err := startDaemon(t, "eo", cfg, shutdownTimeout)
	if err != nil {
		t.Fatal(err)
	}
	pp.d = d
	r.pipes = append(r.pipes, pp)
	r.col.watch(pp.out)
	prod.start(rate)
	r.waitFlowing(60*time.Second, pp)
	res := &result{Backend: e.backend, Case: r.name, Fault: "one exactly-once pipeline: SIGHUP reload, ctl restart, then pause/resume/reload, then the broker restarted under an open transaction",
		Policy: "stop", Role: "ride"}

	// A reload that changes the only pipeline, then a restart.
	write(1000)
	signalDaemon(t, d, syscall.SIGHUP)
	waitStatus(t, d, "applied the reload", func(st app.Status, p *app.PipelineStatus) bool {
		return st.LastReload != nil && st.LastReload.OK && p.Restarts == 1 && p.State == "running"
	})
	var took []string
	ctlTimed := func(args ...string) time.Duration {
		t.Helper()
		d.mu.Lock()
		addr := d.admin
		d.mu.Unlock()
		t0 := time.Now()
		out, err := exec.Command(streamdBin, append([]string{"ctl", "-addr", addr, "-timeout", "30s"}, args...)...).CombinedOutput()
		dt := time.Since(t0)
		if err != nil {
			res.fail(t, "streamd ctl %v: %v\n%s", args, err, out)
		}
		took = append(took, fmt.Sprintf("%s %s", args[0], dt.Round(time.Millisecond)))
		return dt
	}
	ctlTimed("restart", pp.name)
	for _, args := range [][]string{{"pause", pp.name}, {"resume", pp.name}, {"reload"}} {
		if dt, bound := ctlTimed(args...), testenv.AnswerBound(time.Second); dt > bound {
			res.fail(t, "streamd ctl %s after a reload and a restart answered in %s, want within %s (a second, more on an overloaded machine)", args[0], dt, bound)
		}
	}
	waitStatus(t, d, "running after the restart", func(_ app.Status, p *app.PipelineStatus) bool {
		return p.Restarts == 2 && p.State == "running" && !p.Paused && p.Transactions != nil && p.Transactions.Committed > 0
	})

	// The broker restarted while a transaction is open, down for 5 s. The
	// pipeline commits every 2 s (transaction.interval): the transaction
	// open when the broker stops has its records written, and its commit
	// comes while the broker is down ("end transaction (commit true): ...
	// connection refused"): the pipeline fails inside it. (With the
	// default 100 ms the commit often waited for writes still in flight
	// until the broker was back, and the pipeline rode the restart out.)
	// Up to five times, until it failed inside one. On a loaded machine
	// the pipeline's writes are often still in flight when the broker
	// stops, and the commit waits for them until it is back: after a
	// first try under the full input, the input is stopped and one record
	// sent, and the broker stops once that record is written (read
	// uncommitted) and its transaction still open, so that the commit
	// can only come while the broker is down.
	var autos int
	var downs []string
	for i := range 5 {
		down := 5 * time.Second
		quiet := i > 0
		if quiet {
			prod.halt()
			seq := prod.count()
			prod.backlog(1)
			deadline := time.Now().Add(deliverWithin)
			for _, ok := r.col.firstSeen(pp.out, seq); !ok; _, ok = r.col.firstSeen(pp.out, seq) {
				if time.Now().After(deadline) {
					fatalf(t, "record %d not written to %s within %v", seq, pp.out, deliverWithin)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		waitStatus(t, d, "a transaction open", func(_ app.Status, p *app.PipelineStatus) bool {
			return p.Transactions != nil && p.Transactions.Records > 0
		})
		e.stopBroker()
		time.Sleep(down)
		e.startBroker()
		if quiet {
			prod.start(rate)
		}
		st := waitStatus(t, d, "running again after the broker restart", func(_ app.Status, p *app.PipelineStatus) bool {
			return p.State == "running" && p.RestartAt.IsZero() && p.Transactions != nil && p.Transactions.Committed > 0
		})
		autos = pipelineIn(st, pp.name).AutoRestarts
		downs = append(downs, fmt.Sprintf("down %s%s: auto_restarts %d", down, map[bool]string{true: " (one record in the transaction)"}[quiet], autos))
		if autos > 0 || d.exited() {
			break
		}
	}
	if d.exited() {
		res.fail(t, "the daemon exited (%d) after a broker restart, instead of restarting the pipeline:\n%s", d.exitCode(), tail(d.Log(), 3000))
	}
	time.Sleep(afterFault)
	prod.halt()
	if short := r.waitDelivered(time.Now().Add(deliverWithin), nil, pp); len(short) > 0 {
		res.fail(t, "not delivered within %v after the broker restart: %v", deliverWithin, short)
	}
	in := r.readInput()
	got := r.readCommitted(pp.out, in.count)
	for seq := range in.count {
		if got[seq] == 0 {
			res.Missing++
		}
	}
	for seq, n := range got {
		res.Out += n
		if extra := n - in.count[seq]; extra > 0 {
			res.Duplicates += extra
		}
	}
	res.In = len(in.count)
	st := statusOf(t, d)
	p := pipelineIn(st, pp.name)
	res.Readyz = fmt.Sprintf("ctl %s; broker restarted (%s): auto_restarts %d (%s), restarts %d", strings.Join(took, ", "), strings.Join(downs, "; "), p.AutoRestarts,
		clip(p.LastRestartCause, 160), p.Restarts)
	t.Logf("%s: %s; %d in, %d missing, %d duplicates (read_committed); last restart cause: %s", r.name, res.Readyz, res.In, res.Missing, res.Duplicates, p.LastRestartCause)
	if autos == 0 {
		res.fail(t, "broker restarts under open transactions (%s), and the pipeline never failed inside one: nothing shown", strings.Join(downs, "; "))
	}
	if res.Missing > 0 || res.Duplicates > 0 {
		res.fail(t, "exactly-once: %d missing, %d duplicates", res.Missing, res.Duplicates)
	}
	took2, code, ok := d.sigterm()
	res.SigtermSeconds, res.ExitCode = took2.Seconds(), &code
	if !ok || code != 0 {
		res.fail(t, "SIGTERM at the end: exit %d after %v", code, took2)
	}
	record(res)
}

// readCommitted reads topic from its start as a read_committed consumer
// until every seq of want came and 2 s passed with nothing new (or 2
// minutes); it returns how often each seq came.
func (r *run) readCommitted(topic string, want map[int]int) map[int]int {
	cl := r.e.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer cl.Close()
	got := map[int]int{}
	left := len(want)
	last := time.Now()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		if left == 0 && time.Since(last) > 2*time.Second {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(rec *kgo.Record) {
			if seq, ok := seqOf(rec.Value); ok {
				if got[seq] == 0 && want[seq] > 0 {
					left--
				}
				got[seq]++
				last = time.Now()
			}
		})
	}
	return got
}

func signalDaemon(t *testing.T, d *daemon, sig os.Signal) {
	t.Helper()
	d.mu.Lock()
	cmd := d.cmd
	d.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v", sig, err)
	}
}

// statusOf GETs the daemon's /v1/status.
func statusOf(t *testing.T, d *daemon) app.Status {
	t.Helper()
	d.mu.Lock()
	addr := d.admin
	d.mu.Unlock()
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/v1/status")
	if err != nil {
		return app.Status{}
	}
	defer func() { _ = resp.Body.Close() }()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	var st app.Status
	if err := json.Unmarshal(b.Bytes(), &st); err != nil {
		t.Fatalf("/v1/status: %v: %s", err, b.String())
	}
	return st
}

func pipelineIn(st app.Status, name string) *app.PipelineStatus {
	for i := range st.Pipelines {
		if st.Pipelines[i].Name == name {
			return &st.Pipelines[i]
		}
	}
	return &app.PipelineStatus{}
}

// waitStatus waits until ok holds for the daemon's only pipeline, at most
// deliverWithin; it fails the test if the daemon exits meanwhile.
func waitStatus(t *testing.T, d *daemon, what string, ok func(app.Status, *app.PipelineStatus) bool) app.Status {
	t.Helper()
	deadline := time.Now().Add(deliverWithin)
	for {
		if d.exited() {
			fatalf(t, "waiting until %s: the daemon exited (%d):\n%s", what, d.exitCode(), tail(d.Log(), 3000))
		}
		st := statusOf(t, d)
		if len(st.Pipelines) == 1 && ok(st, &st.Pipelines[0]) {
			return st
		}
		if time.Now().After(deadline) {
			fatalf(t, "not %s within %v: %+v", what, deliverWithin, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
