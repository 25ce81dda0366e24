package faults

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// takeoverWithin bounds how long a restarted process may take to get its
// partitions back and write again ("within seconds by
// default"); the session timeout (45 s) is what it must not wait for.
const takeoverWithin = 10 * time.Second

// sigkill kills the daemon twice while records flow and starts it again at
// once, with or without instance_id.
func sigkill(static bool) func(t *testing.T) {
	return func(t *testing.T) {
		e := newEnv(t, shared)
		r := newRun(t, e)
		p := r.producer(nil, nil)
		p.start(rate)
		d := r.daemon("kill", daemonOpts{instanceID: static})
		ps := r.pipesOf(d)
		r.waitFlowing(60*time.Second, ps...)
		const kills = 2
		takeover := map[killKey]time.Duration{}
		var restarts []time.Time
		for k := 0; k < kills; k++ {
			// Let it run a few commit intervals (1 s) first: a kill then
			// finds a process that committed what it caught up on, and
			// replays at most max_in_flight plus ~1 s of input.
			time.Sleep(3 * time.Second)
			d.kill()
			restarted := time.Now()
			restarts = append(restarts, restarted)
			d.restart()
			base := map[*pipe]int{}
			for _, pp := range ps {
				base[pp] = r.col.seen(pp.out)
			}
			// Takeover: the first new record out after the restart.
			for deadline := time.Now().Add(deliverWithin); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				left := 0
				for _, pp := range ps {
					if _, ok := takeover[killKey{pp, k}]; ok {
						continue
					}
					if r.col.seen(pp.out) > base[pp] {
						takeover[killKey{pp, k}] = time.Since(restarted)
					} else {
						left++
					}
				}
				if left == 0 {
					break
				}
			}
		}
		p.halt()
		short := r.waitDelivered(time.Now().Add(deliverWithin), nil, ps...)
		if len(short) > 0 {
			t.Errorf("not delivered %v after the last restart: %v", deliverWithin, short)
		}
		took, code, ok := d.sigterm()
		in := r.readInput()
		mode := "without instance_id"
		if static {
			mode = "with instance_id"
		}
		for _, pp := range ps {
			res := &result{Backend: e.backend, Case: r.name, Fault: fmt.Sprintf("streamd SIGKILLed and restarted at once, %d times, %s", kills, mode),
				Policy: pp.policy, Role: "kill"}
			res.fill(t, r.account(in, pp, nil, nil), kills)
			var worst time.Duration
			var says []string
			for k := 0; k < kills; k++ {
				tk, ok := takeover[killKey{pp, k}]
				if !ok {
					res.fail(t, "restart %d: no output within %v", k+1, deliverWithin)
					worst = -1
					continue
				}
				if tk > takeoverWithin {
					res.fail(t, "restart %d: partitions back and writing after %.1fs (want within %v)", k+1, tk.Seconds(), takeoverWithin)
				}
				if worst >= 0 && tk > worst {
					worst = tk
				}
				says = append(says, fmt.Sprintf("restart %d: writing after %.1fs, /readyz %s", k+1, tk.Seconds(),
					readyzSummary(d, pp.name, restarts[k], restarts[k].Add(tk))))
			}
			res.RecoverSeconds = worst.Seconds()
			if worst < 0 {
				res.RecoverSeconds = -1
			}
			res.Readyz = strings.Join(says, "; ")
			if !ok || code != 0 || took > shutdownTimeout+exitSlack {
				res.fail(t, "SIGTERM after recovery: exit %d after %v (want 0 within %v)", code, took, shutdownTimeout+exitSlack)
			}
			record(res)
		}
		if t.Failed() {
			t.Logf("log tail:\n%s", tail(d.Log(), 3000))
		}
	}
}

type killKey struct {
	p *pipe
	k int
}

// bigSize is an oversize record: over the producer's and the broker's
// default 1 MiB limit, within the input topic's 8 MiB.
const bigSize = 1536 << 10

// oversize puts three records over 1 MiB among 3,000 in the input: drop
// must drop just them, dlq dead-letter just them, stop fail at the first
// and hold back what follows, each saying which record it was; nothing
// hangs silently.
func oversize(t *testing.T) {
	e := newEnv(t, shared)
	r := newRun(t, e, "max.message.bytes=8388608")
	big := map[int]int{500: bigSize, 1500: bigSize, 2500: bigSize}
	bad := map[int]bool{}
	for seq := range big {
		bad[seq] = true
	}
	p := r.producer(nil, big)
	p.backlog(3000)
	started := time.Now()
	ride := r.daemon("ride", daemonOpts{policies: []string{"drop", "dlq"}})
	stopper := r.daemon("stop", daemonOpts{policies: []string{"stop"}})
	p.start(rate)
	time.Sleep(afterFault) // some input after the bad records
	p.halt()
	t0 := time.Now()
	short := r.waitDelivered(time.Now().Add(deliverWithin), bad, r.pipesOf(ride)...)
	if len(short) > 0 {
		t.Errorf("not delivered within %v: %v", deliverWithin, short)
	}
	// The stop pipeline must fail, say why and where, and not hang
	// silently: its daemon exits non-zero, or stays up with /readyz 503
	// naming the pipeline with a reason.
	in := r.readInput()
	var where []string
	for _, x := range in.recs {
		if x.ok && bad[x.seq] {
			where = append(where, fmt.Sprintf("%d@%d", x.partition, x.offset), fmt.Sprintf("partition=%d offset=%d", x.partition, x.offset))
		}
	}
	stopPipe := r.pipesOf(stopper)[0]
	var stopSays string
	var stopFails []string
	names := func() bool {
		for _, w := range where {
			if strings.Contains(stopper.Log(), w) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Wait for the verdict (the log names the bad record), then
		// see what the daemon does about it.
		if !names() && !stopper.exited() && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		if stopper.exited() {
			stopSays = fmt.Sprintf("process exited %d", stopper.exitCode())
			if stopper.exitCode() == 0 {
				stopFails = append(stopFails, "the stop pipeline's daemon exited 0 after a bad record")
			}
			break
		}
		code, body := stopper.readyNow()
		if named, why := notReadyReason(body, stopPipe.name); code == 503 && named && why != "" {
			stopSays = fmt.Sprintf("503 (%q)", clip(why, 120))
			break
		}
		if time.Now().After(deadline) {
			code, body := stopper.readyNow()
			stopSays = fmt.Sprintf("%d %s", code, clip(body, 200))
			stopFails = append(stopFails, "60s after the bad records the stop pipeline's daemon neither exited nor said 503 with a reason: "+stopSays)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !names() {
		stopFails = append(stopFails, "the log names none of the bad records' partition and offset "+fmt.Sprint(where))
	}
	stopTook, stopCode, stopOK := time.Duration(0), stopper.exitCode(), true
	if !stopper.exited() {
		stopTook, stopCode, stopOK = stopper.sigterm()
	}
	rideTook, rideCode, rideOK := ride.sigterm()
	for _, pp := range r.pipes {
		res := &result{Backend: e.backend, Case: r.name, Fault: "3 records of 1.5 MiB (over the 1 MiB producer limit) among 3,000",
			Policy: pp.policy, Role: "ride"}
		a := r.account(in, pp, bad, nil)
		res.fill(t, a, 1)
		res.RecoverSeconds = time.Since(t0).Seconds()
		switch pp.policy {
		case "drop":
			if st, ok := ride.status(pp.name); !ok || st.Dropped < int64(len(bad)) {
				res.fail(t, "dropped count %d, want %d", st.Dropped, len(bad))
			}
			res.Readyz = readyzSummary(ride, pp.name, started, time.Now())
		case "dlq":
			if a.dlq < len(bad) {
				res.fail(t, "%d of %d bad records in the DLQ", a.dlq, len(bad))
			}
			res.Readyz = readyzSummary(ride, pp.name, started, time.Now())
		case "stop":
			res.Readyz = stopSays
			res.RecoverSeconds = 0
			for _, f := range stopFails {
				res.fail(t, "%s", f)
			}
			c := stopCode
			res.ExitCode = &c
			if !stopOK || stopTook > shutdownTimeout+exitSlack {
				res.fail(t, "SIGTERM: exit took %v (killed: %v), shutdown_timeout %v", stopTook, !stopOK, shutdownTimeout)
			}
		}
		if pp.policy != "stop" && (!rideOK || rideCode != 0 || rideTook > shutdownTimeout+exitSlack) {
			res.fail(t, "SIGTERM: exit %d after %v (want 0 within %v)", rideCode, rideTook, shutdownTimeout+exitSlack)
		}
		record(res)
	}
	if t.Failed() {
		t.Logf("ride log tail:\n%s\nstop log tail:\n%s", tail(ride.Log(), 3000), tail(stopper.Log(), 3000))
	}
}

// fileOld runs three file-source pipelines over 5,000 JSON-lines records
// with 2020 timestamps into Kafka (the README's record format): each must
// end, state done, with every record written and its timestamp kept.
func fileOld(t *testing.T) {
	e := newEnv(t, shared)
	r := newRun(t, e)
	const n = 5000
	var lines strings.Builder
	in := &input{count: map[int]int{}, at: map[[2]int64]int{}}
	for seq := 0; seq < n; seq++ {
		ts := old2020.Add(time.Duration(seq) * time.Second)
		fmt.Fprintf(&lines, `{"key":"k-%d","value":%q,"timestamp":%q}`+"\n", seq, orderValue(seq, 250), ts.Format(time.RFC3339))
		in.recs = append(in.recs, rec{seq: seq, ok: true, offset: int64(seq), ts: ts, srcPart: -1})
		in.count[seq] = 1
	}
	path := filepath.Join(t.TempDir(), "old.jsonl")
	if err := os.WriteFile(path, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	d := r.daemon("file", daemonOpts{source: fmt.Sprintf("type = \"file\"\npath = %q", path)})
	select {
	case <-d.done:
	case <-time.After(deliverWithin):
		t.Errorf("streamd run did not end %v after its file sources' last record", deliverWithin)
	}
	took := time.Since(t0)
	var code int
	if d.exited() {
		code = d.exitCode()
	} else {
		_, code, _ = d.sigterm()
	}
	for _, pp := range r.pipes {
		res := &result{Backend: e.backend, Case: r.name, Fault: "file source: 5,000 records with 2020 timestamps", Policy: pp.policy, Role: "file"}
		a := r.account(in, pp, nil, nil)
		res.fill(t, a, 0)
		res.RecoverSeconds = took.Seconds()
		res.Readyz = readyzSummary(d, pp.name, t0, time.Now())
		c := code
		res.ExitCode = &c
		if code != 0 {
			res.fail(t, "streamd run exited %d", code)
		}
		checkTimestampsKept(t, r, in, pp, a, res)
		record(res)
	}
	if t.Failed() {
		t.Logf("log tail:\n%s", tail(d.Log(), 3000))
	}
}

var (
	pluginOnce sync.Once
	pluginPath string
	pluginErr  error
)

// downgradePlugin builds examples/wasm/go/orders-downgrade with its
// build.sh.
func downgradePlugin(t *testing.T) string {
	pluginOnce.Do(func() {
		dir := filepath.Join(root, "examples", "wasm", "go", "orders-downgrade")
		out, err := exec.Command("sh", filepath.Join(dir, "build.sh")).CombinedOutput()
		if err != nil {
			pluginErr = fmt.Errorf("%v\n%s", err, out)
		}
		pluginPath = filepath.Join(dir, "plugin.wasm")
	})
	if pluginErr != nil {
		t.Fatalf("building the orders-downgrade plugin: %v", pluginErr)
	}
	return pluginPath
}

// mountTmpfs mounts a tmpfs of size bytes at dir until the test ends.
func mountTmpfs(t *testing.T, dir string, size int) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		testenv.Missing(t, fmt.Sprintf("a tmpfs mount (needs root or CAP_SYS_ADMIN): %v", err))
	}
	t.Cleanup(func() {
		for i := 0; i < 50; i++ {
			if err := syscall.Unmount(dir, 0); err == nil || errors.Is(err, syscall.EINVAL) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// fill writes path until the filesystem is full.
func fill(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if f == nil {
		return
	}
	defer testenv.Ignore(f.Close) // written until the disk is full
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// lastGrowth returns the time of the last sample in ss at which the
// output of one of pipelines had grown since the sample before, or from
// when there is none.
func lastGrowth(ss []sample, pipelines []string, from time.Time) time.Time {
	at := from
	last := map[string]int64{}
	for _, s := range ss {
		for _, name := range pipelines {
			ps, ok := s.pipelines[name]
			if !ok {
				continue
			}
			if prev, seen := last[name]; seen && ps.Out != prev {
				at = s.at
			}
			last[name] = ps.Out
		}
	}
	return at
}

// fullDisk fills the filesystem of data_dir (a tmpfs) while the quickstart
// layout runs: streamd run with its embedded broker persisting under
// data_dir/broker and the Wasm downgrade compiled into data_dir's cache.
// A third daemon starts while the disk is full, with a cold cache.
func fullDisk(t *testing.T) {
	base := t.TempDir()
	// 256 MiB: room for the case's records (~70 MB stored) before the
	// filler takes the rest.
	mountTmpfs(t, base, 256<<20)
	plugin := downgradePlugin(t)
	addr := freeAddr(t)
	e := &kenv{t: t, backend: backend(), seeds: []string{addr}, direct: []string{addr}}
	r := newRunAt(t, e)
	r.noOutputs = true
	ride := r.daemon("ride", daemonOpts{embedded: addr, dataDir: filepath.Join(base, "ride"), transform: plugin})
	e.initAdmin()
	r.col.start() // the input topic: created by the pipelines' sources
	term := r.daemon("sigterm", daemonOpts{dataDir: filepath.Join(base, "sigterm"), transform: plugin})
	p := r.producer(nil, nil)
	p.start(rate)
	r.waitFlowing(60*time.Second, r.pipes...)
	// The fault starts when the disk is full, not when filling it starts:
	// writing the ~180 MB filler took seconds in a trial CI run (load
	// ~10), while the pipelines went on writing, so /readyz measured from
	// the start of the filling said 503 "only 15.8s into the full disk"
	// though the stall had begun 11 s before.
	fillStart := time.Now()
	fill(t, filepath.Join(base, "filler"))
	start := time.Now()
	t.Logf("the disk under data_dir filled in %.1fs", start.Sub(fillStart).Seconds())
	var late *daemon
	var lateErr string
	lateStarted := make(chan struct{})
	go func() {
		defer close(lateStarted)
		late, lateErr = r.tryDaemon("late", daemonOpts{dataDir: filepath.Join(base, "late"), transform: plugin})
	}()
	var termTook time.Duration
	termCode, termOK := 0, true
	termDone := make(chan struct{})
	go func() {
		defer close(termDone)
		time.Sleep(time.Until(start.Add(8 * time.Second)))
		termTook, termCode, termOK = term.sigterm()
	}()
	// 20 s: over stall_timeout + stallSlack, so that /readyz's verdict
	// shows; the sink's retry backoff reaches its cap (retry_max, 10 s).
	// No client timeout matters: the broker answers at once. Longer while
	// a pipeline of ride still writes: a full tmpfs takes appends that fit
	// in a file's last page, and one of a pipeline's two workers went on
	// writing for 11 s into the full disk in a CI run (kfake, load ~6), so
	// its stall had lasted 9 s, under stall_timeout, when the disk was
	// freed at 20 s and /readyz rightly said 200. The disk is freed once
	// no ride pipeline's output has grown for stall_timeout + stallSlack
	// and a second, at most 45 s into the fault.
	time.Sleep(time.Until(start.Add(20 * time.Second)))
	var ridePipes []string
	for _, pp := range r.pipes {
		if pp.d == ride {
			ridePipes = append(ridePipes, pp.name)
		}
	}
	for time.Since(lastGrowth(ride.samplesIn(start, time.Now()), ridePipes, start)) < stallTimeout+stallSlack+time.Second &&
		time.Since(start) < 45*time.Second {
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("the disk is freed %.1fs into the fault; ride's output last grew at +%.1fs",
		time.Since(start).Seconds(), lastGrowth(ride.samplesIn(start, time.Now()), ridePipes, start).Sub(start).Seconds())
	if err := os.Remove(filepath.Join(base, "filler")); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	<-termDone
	<-lateStarted
	time.Sleep(afterFault)
	p.halt()
	restarted := time.Now()
	term.restart()
	ps := r.pipes
	short := r.waitDelivered(time.Now().Add(deliverWithin), nil, ps...)
	if len(short) > 0 {
		t.Errorf("not delivered %v after the fault: %v", deliverWithin, short)
	}
	// The accounting reads the embedded broker: before its daemon stops.
	in := r.readInput()
	accounts := map[*pipe]account{}
	for _, pp := range ps {
		accounts[pp] = r.account(in, pp, nil, nil)
	}
	stops := map[*daemon][3]any{}
	for _, d := range []*daemon{late, term, ride} {
		if d != nil && !d.exited() {
			took, code, ok := d.sigterm()
			stops[d] = [3]any{took, code, ok}
		}
	}
	for _, pp := range ps {
		res := &result{Backend: e.backend, Case: r.name, Fault: fmt.Sprintf("disk under data_dir full (tmpfs; embedded broker and Wasm cache on it) (%.0f s)", end.Sub(start).Seconds()),
			Policy: pp.policy, Role: pp.role}
		res.fill(t, accounts[pp], 2)
		switch pp.d {
		case ride:
			res.RecoverSeconds = r.recovery(pp, end, nil)
			summary, first503, reason, _ := readyzDuring(ride.samplesIn(start, end), pp.name, start)
			res.Readyz = summary
			// The stall starts when the pipeline's output last grew: a
			// full tmpfs still takes appends that fit in a file's last
			// page, so one pipeline went on writing for 5.8 s after the
			// disk was full in a trial CI run while the others stopped at
			// once (its /readyz said 503 11 s after its last write).
			stalled := start
			lastOut := int64(-1)
			for _, s := range ride.samplesIn(start, first503) {
				if ps, ok := s.pipelines[pp.name]; ok {
					if lastOut >= 0 && ps.Out != lastOut {
						stalled = s.at
					}
					lastOut = ps.Out
				}
			}
			switch {
			case first503.IsZero():
				res.fail(t, "/readyz said 200 throughout the full disk while the pipeline was stalled")
			case first503.After(stalled.Add(stallTimeout + stallSlack)): // the broker answers at once
				res.fail(t, "/readyz said 503 only %.1fs into the full disk, %.1fs after the pipeline's output last grew (stall_timeout %v)",
					first503.Sub(start).Seconds(), first503.Sub(stalled).Seconds(), stallTimeout)
			case !strings.Contains(strings.ToLower(reason), "no space"):
				res.fail(t, "/readyz did not say the disk is full: %q", reason)
			}
		case term:
			res.RecoverSeconds = r.recovery(pp, restarted, nil)
			c := termCode
			res.ExitCode = &c
			res.SigtermSeconds = termTook.Seconds()
			res.Readyz = "SIGTERM at +8s; " + readyzSummary(term, pp.name, start, start.Add(8*time.Second))
			if !termOK || termTook > shutdownTimeout+exitSlack {
				res.fail(t, "SIGTERM during the fault: exit took %.1fs (killed: %v), shutdown_timeout %v", termTook.Seconds(), !termOK, shutdownTimeout)
			}
		default: // late
			res.RecoverSeconds = r.recovery(pp, end, nil)
			res.Readyz = "started on the full disk, ran"
			if lateErr != "" {
				res.Readyz = "started on the full disk: " + clip(lateErr, 200)
			}
		}
		if s, ok := stops[pp.d]; ok && (!s[2].(bool) || s[1].(int) != 0) {
			res.fail(t, "SIGTERM after recovery: exit %v after %v", s[1], s[0])
		}
		record(res)
	}
	// A daemon started on the full disk runs (the compile cache is only
	// a cache) or says that the disk is full.
	if late == nil && !strings.Contains(lateErr, "no space left on device") {
		t.Errorf("a daemon started on the full disk failed without saying the disk is full: %s", lateErr)
	}
	for _, d := range []*daemon{ride, term, late} {
		if d != nil && strings.Contains(d.Log(), "not a valid WebAssembly module") {
			t.Errorf("%s reports the full disk as an invalid Wasm module", d.name)
		}
	}
	if t.Failed() {
		for _, d := range []*daemon{ride, term, late} {
			if d != nil {
				t.Logf("%s log tail:\n%s", d.name, tail(d.Log(), 3000))
			}
		}
	}
}
