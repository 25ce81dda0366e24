package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// shapePlugins builds testdata/shape twice, as kind "a" and kind "b",
// once per test binary.
var shapePlugins = sync.OnceValues(func() ([2]string, error) {
	var out [2]string
	dir, err := os.MkdirTemp("", "streamd-e2e-shape")
	if err != nil {
		return out, err
	}
	wd, _ := os.Getwd()
	for i, kind := range []string{"a", "b"} {
		out[i] = filepath.Join(dir, "shape-"+kind+".wasm")
		build := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags", "-X main.kind="+kind, "-o", out[i], "./testdata/shape")
		build.Dir = wd
		build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if b, err := build.CombinedOutput(); err != nil {
			return out, fmt.Errorf("build the shape plugin: %v\n%s", err, b)
		}
	}
	return out, nil
})

// operatorRecords is how many records flow through the operator's
// reloads: 150,000 on a real Kafka, fewer on kfake (the kfake pass runs
// the same sequence, with the broker in the test's process).
func operatorRecords(b *testenv.Broker) int {
	if b.Real {
		return 150_000
	}
	return 40_000
}

// TestOperatorReloads is the operator's sequence on a daemon that runs ONE
// pipeline, exactly-once and at-least-once: five SIGHUPs while records
// flow, three valid changes of the transform's path and config and two
// broken files. Each valid one is applied (the output's shape header
// follows it: every record after it carries the new file's kind and the
// new config's tag, never an older one in a partition); each broken one
// is refused with FILE:LINE in the log and in /v1/status, and changes
// nothing; no record is missing, and none is duplicated under exactly-once
// (read_committed). Then the controls answer within a second: ctl pause,
// resume, restart and reload. Before, the second SIGHUP of a one-pipeline
// daemon was not even logged.
func TestOperatorReloads(t *testing.T) {
	for _, delivery := range []string{"exactly-once", "at-least-once"} {
		t.Run(delivery, func(t *testing.T) { operatorReloads(t, delivery) })
	}
}

func operatorReloads(t *testing.T, delivery string) {
	plugins, err := shapePlugins()
	if err != nil {
		t.Fatal(err)
	}
	b := testenv.Kafka(t)
	in, out := testenv.Topic(t, "in"), testenv.Topic(t, "out")
	b.CreateTopic(t, in, 4)
	b.CreateTopic(t, out, 4)
	group := testenv.Topic(t, "g")
	head := fmt.Sprintf("data_dir = %q\n", t.TempDir()) + brokersTOML(b) + fmt.Sprintf("[admin]\nlisten = %q\n", freePort(t))
	// file is the config with the transform's plugin (kind a or b) and
	// tag; bad breaks it at a line the refusal must name.
	type version struct {
		kind, tag string
		bad       string // "": valid; else the key = value line that breaks it
	}
	body := func(v version) string {
		s := head + fmt.Sprintf(`
[[pipeline]]
name = "orders"
delivery = %q
shutdown_timeout = "10s"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[[pipeline.transform]]
type = "wasm"
path = %q
[pipeline.transform.config]
tag = %q
[pipeline.sink]
type = "kafka"
topic = %q
`, delivery, in, group, plugins[map[string]int{"a": 0, "b": 1}[v.kind]], v.tag, out)
		if v.bad != "" {
			s = strings.Replace(s, "[pipeline.source]\n", "[pipeline.source]\n"+v.bad+"\n", 1)
		}
		return s
	}
	lineOf := func(s, sub string) int { return strings.Count(s[:strings.Index(s, sub)], "\n") + 1 }
	cfg := writeConfig(t, body(version{kind: "a", tag: "0"}))
	n := operatorRecords(b)
	d := start(t, cfg)
	addr := d.adminAddr(t)

	steps := []version{
		{kind: "b", tag: "1"},
		{kind: "b", tag: "1", bad: "topcis = [\"x\"]"},
		{kind: "a", tag: "2"},
		{kind: "a", tag: "2", bad: "start = \"yesterday\""},
		{kind: "b", tag: "3"},
	}
	// The records flow in the background, 1,000 at a time, in one phase
	// before each SIGHUP and one after the last, each over about 4 s (2 s
	// on kfake). A SIGHUP is sent halfway through its phase, while records
	// flow, and the next phase starts once the daemon has answered it:
	// every version gets records, however long a reload takes on a loaded
	// machine.
	cl := b.Client(t, kgo.ProducerLinger(5*time.Millisecond))
	produced := make(chan error, 1)
	phaseDone := make(chan struct{}) // a phase is halfway written
	stepDone := make(chan struct{})  // its SIGHUP was answered
	const chunk = 1000
	phases := len(steps) + 1
	perPhase := n / phases / chunk * chunk
	span := 4 * time.Second
	if !b.Real {
		span = 2 * time.Second
	}
	pause := span / time.Duration(perPhase/chunk)
	half := perPhase / 2 / chunk * chunk
	go func() {
		for i := 0; i < n; i += chunk {
			k := i / perPhase
			if i > 0 && i%perPhase == 0 && k < phases {
				<-stepDone // the SIGHUP of the phase before was answered
			}
			if i%perPhase == half && k < len(steps) {
				phaseDone <- struct{}{} // send the next SIGHUP now
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			recs := make([]*kgo.Record, 0, chunk)
			for j := i; j < i+chunk && j < n; j++ {
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k-" + strconv.Itoa(j%1000)), Value: []byte(fmt.Sprintf(`{"id":%d}`, j)),
					Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(j))}}})
			}
			err := cl.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				produced <- err
				return
			}
			time.Sleep(pause)
		}
		produced <- nil
	}()
	waitPipeline(t, addr, "orders", "writing", 2*time.Minute, func(p *app.PipelineStatus) bool { return p.Out > 1000 })

	shapes := []string{"a:0"}
	applied, refused := 0, 0
	var last time.Time
	for i, v := range steps {
		select {
		case <-phaseDone:
		case err := <-produced:
			t.Fatalf("producer: %v", err)
		}
		text := body(v)
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		d.signal(t, syscall.SIGHUP)
		var st app.Status
		for st = status(t, addr); st.LastReload == nil || !st.LastReload.At.After(last); st = status(t, addr) {
			if time.Since(sent) > time.Minute {
				t.Fatalf("SIGHUP %d: no reload result in /v1/status a minute after it", i+1)
			}
			time.Sleep(20 * time.Millisecond)
		}
		answered := time.Since(sent)
		r := st.LastReload
		last = r.At
		if v.bad == "" {
			if !r.OK || fmt.Sprint(r.Changed) != "[orders]" {
				t.Fatalf("SIGHUP %d (valid: %s, tag %s): %+v", i+1, v.kind, v.tag, *r)
			}
			applied++
			shapes = append(shapes, v.kind+":"+v.tag)
			p := waitPipeline(t, addr, "orders", "running again", 2*time.Minute, func(p *app.PipelineStatus) bool {
				return p.State == "running" && p.Restarts == applied
			})
			t.Logf("SIGHUP %d applied in %s (in /v1/status %s after the signal): %s, restarts %d", i+1, r.Took, answered.Round(time.Millisecond), shapes[len(shapes)-1], p.Restarts)
		} else {
			where := fmt.Sprintf("%s:%d:", cfg, lineOf(text, v.bad))
			if r.OK || !strings.Contains(st.ReloadError, where) {
				t.Fatalf("SIGHUP %d (broken at %s): %+v, reload_error %q", i+1, where, *r, st.ReloadError)
			}
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(d.logText(), where); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("SIGHUP %d: the refusal at %s is not in the log", i+1, where)
				}
			}
			if p := pipelineOf(st, "orders"); p == nil || p.Restarts != applied || p.State != "running" {
				t.Fatalf("SIGHUP %d: a refused reload changed the pipeline: %+v", i+1, p)
			}
			refused++
			t.Logf("SIGHUP %d refused (in /v1/status %s after the signal): %s", i+1, answered.Round(time.Millisecond), strings.SplitN(st.ReloadError, "\n", 2)[0])
		}
		stepDone <- struct{}{} // the next phase's records flow with this version
	}
	if err := <-produced; err != nil {
		t.Fatalf("producer: %v", err)
	}

	// The controls answer within a second after reloads and a restart.
	timed := func(args ...string) time.Duration {
		t.Helper()
		t0 := time.Now()
		o, e, code := ctl(t, cfg, args...)
		took := time.Since(t0)
		if code != 0 {
			t.Fatalf("streamd ctl %v: exit %d\n%s%s", args, code, o, e)
		}
		return took
	}
	var took []string
	for _, args := range [][]string{{"restart", "orders"}, {"pause", "orders"}, {"resume", "orders"}, {"reload"}} {
		dt := timed(args...)
		took = append(took, fmt.Sprintf("%s %s", args[0], dt.Round(time.Millisecond)))
		if bound := testenv.AnswerBound(time.Second); args[0] != "restart" && dt > bound {
			t.Errorf("streamd ctl %s answered after %s, want within %s (a second, more on an overloaded machine)", args[0], dt, bound)
		}
	}
	t.Logf("streamd ctl (a process each): %s", strings.Join(took, ", "))

	// Every record once (exactly-once) or at least once; the shapes in
	// each partition in the order of the reloads.
	committed := delivery == "exactly-once"
	opts := []kgo.Opt{kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	rd := b.Client(t, opts...)
	seen := map[int]int{}
	shapeRank := map[string]int{}
	for i, s := range shapes {
		shapeRank[s] = i
	}
	perShape := make([]int, len(shapes))
	lastRank := map[int32]int{}
	backwards := 0
	var full time.Time
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		if len(seen) >= n {
			if full.IsZero() {
				full = time.Now()
			} else if time.Since(full) > 3*time.Second {
				break // late duplicates would have come
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := rd.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			var seq, shape string
			for _, h := range r.Headers {
				switch h.Key {
				case "seq":
					seq = string(h.Value)
				case "shape":
					shape = string(h.Value)
				}
			}
			s, _ := strconv.Atoi(seq)
			seen[s]++
			rank, ok := shapeRank[shape]
			if !ok {
				t.Errorf("record %s at %d@%d has shape %q, not one of %v", seq, r.Partition, r.Offset, shape, shapes)
				return
			}
			perShape[rank]++
			if rank < lastRank[r.Partition] {
				backwards++
			}
			lastRank[r.Partition] = max(lastRank[r.Partition], rank)
		})
	}
	missing, dups := 0, 0
	for i := range n {
		switch c := seen[i]; {
		case c == 0:
			missing++
		case c > 1:
			dups += c - 1
		}
	}
	t.Logf("%s, one pipeline: %d records, %d SIGHUPs applied, %d refused; %d missing, %d duplicates; records by shape %v: %v; shapes going back in a partition: %d",
		delivery, n, applied, refused, missing, dups, shapes, perShape, backwards)
	if applied != 3 || refused != 2 || missing > 0 || (committed && dups > 0) || backwards > 0 {
		t.Fatalf("want 3 applied, 2 refused, 0 missing, 0 going back, and 0 duplicates under exactly-once")
	}
	for i, c := range perShape {
		if c == 0 {
			t.Fatalf("no record has shape %s: the reload to it did not change the output", shapes[i])
		}
	}
	d.stop(t)
}
