package app_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/load"
	"github.com/streamd/streamd/record"
)

// The control plane's model test: random sequences of reloads (valid,
// broken, changing or not the only pipeline, removing the last one),
// pauses, resumes, restarts, SIGHUP bursts, plugin hot reloads and
// injected pipeline failures (exactly-once ones inside a transaction,
// which restart by themselves; others under policy stop, which end the
// pipeline), a reload during an automatic restart's backoff and a pause
// during a reload, against daemons of one, two and three pipelines run in
// process. A model of what the daemon must then be (its running config,
// each pipeline's state, pause and restart counts, whether it exited) is
// checked after every step, and every request must be answered within
// answerWithin.
//
// Sized for CI by default (modelChecks sequences of about modelSteps
// steps, a fixed seed); -rapid.checks, -rapid.steps and -rapid.seed (0:
// random) run it longer by hand. Against a real Kafka
// (STREAMD_TEST_KAFKA_BROKERS) it runs modelChecksReal sequences.
func TestControlModel(t *testing.T) {
	b := testenv.Kafka(t)
	checks := modelChecks
	if b.Real {
		checks = modelChecksReal
	}
	setRapidFlags(t, map[string]string{"rapid.seed": modelSeed, "rapid.checks": strconv.Itoa(checks),
		"rapid.steps": strconv.Itoa(modelSteps), "rapid.nofailfile": "true"})
	dir := t.TempDir()
	wasm := [2][]byte{}
	for i, extra := range [][]string{nil, {"--debug-names"}} {
		out := filepath.Join(dir, fmt.Sprintf("identity-%d.wasm", i))
		testenv.Wat2Wasm(t, filepath.Join(testenv.Root(), "examples", "wasm", "wat", "identity.wat"), out, extra...)
		bin, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		wasm[i] = bin
	}
	var seq, steps atomic.Int64
	start := time.Now()
	rapid.Check(t, func(rt *rapid.T) {
		m := newControlModel(t, rt, b, wasm, int(seq.Add(1)))
		defer func() { steps.Add(int64(m.steps)) }()
		rt.Repeat(map[string]func(*rapid.T){
			"reload":              m.reload,
			"reload broken":       m.reloadBroken,
			"reload removing all": m.reloadRemovingAll,
			"pause":               m.pause,
			"resume":              m.resume,
			"restart":             m.restart,
			"sighup burst":        m.sighup,
			"plugin hot reload":   m.pluginReload,
			"fail":                m.fail,
			"reload in a backoff": m.reloadInBackoff,
			"pause in a reload":   m.pauseInReload,
			"":                    m.check,
		})
	})
	t.Logf("%d sequences, %d steps in %s (seed %s); steps by kind: %s", seq.Load(), steps.Load(), time.Since(start).Round(time.Millisecond),
		flag.Lookup("rapid.seed").Value, did.String())
}

// did counts the steps that did what their name says, by name.
var did counts

type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) add(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[what]++
}

func (c *counts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, v := range c.n {
		out = append(out, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// The model test's CI budget: sequences on kfake and on a real Kafka, the
// mean steps of each, and the seed.
const (
	modelChecks     = 30
	modelChecksReal = 5
	modelSteps      = 15
	modelSeed       = "20261207"
)

// setRapidFlags sets rapid's flags to defaults, unless given on the
// command line.
func setRapidFlags(t *testing.T, defaults map[string]string) {
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for k, v := range defaults {
		if !given[k] {
			if err := flag.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
}

type pipeKind int

const (
	kindGen pipeKind = iota // generate -> wasm identity -> drop
	kindEO                  // kafka -> kafka, exactly-once
)

// pipeSpec is a pipeline as the file says it.
type pipeSpec struct {
	name    string
	kind    pipeKind
	version int // tells one version of its table from another
	paused  bool
}

// modelPipe is a pipeline of the running config, as the model expects it.
type modelPipe struct {
	spec         pipeSpec
	failed       bool // ended by a failure that does not restart by itself
	paused       bool // wanted paused
	restarts     int
	autoRestarts int
	variant      int // a gen pipeline's: the build of the plugin file it runs
}

// controlModel is one sequence: a daemon and what it must be.
type controlModel struct {
	tb      *testing.T
	b       *testenv.Broker
	a       *app.App
	file    string
	head    string
	journal bool
	wasm    [2][]byte
	plugin  string // the gen pipelines' plugin file
	variant int    // which wasm variant the plugin file holds
	broken  bool   // the plugin file does not load
	faults  *faultInjector
	hup     chan os.Signal
	logs    *lockedWriter

	done   chan struct{}
	runErr error

	pipes      []*modelPipe // the running config, in its order
	next       int          // the next new pipeline's number
	exited     bool         // the daemon must have exited
	lastReload *bool        // whether the last reload must have been applied
	topics     map[string][2]string
	steps      int
	counted    bool // its exit was counted
	prod       *kgo.Client
}

func newControlModel(tb *testing.T, rt *rapid.T, b *testenv.Broker, wasm [2][]byte, seq int) *controlModel {
	dir := tb.TempDir()
	m := &controlModel{tb: tb, b: b, wasm: wasm, file: filepath.Join(dir, "streamd.toml"), plugin: filepath.Join(dir, "identity.wasm"),
		faults: &faultInjector{armed: map[string]fault{}}, hup: make(chan os.Signal, 1), topics: map[string][2]string{},
		logs: &lockedWriter{w: &strings.Builder{}}, done: make(chan struct{})}
	m.journal = rapid.Bool().Draw(rt, "journal")
	m.head = fmt.Sprintf("data_dir = %q\n[kafka]\nbrokers = [%q]\n[plugins]\nwatch = \"1h\"\n", filepath.Join(dir, "data"), b.Seeds[0])
	if m.journal {
		// A config may then have no pipeline: a reload may remove the
		// last one.
		m.head += fmt.Sprintf("[journal]\nstore = %q\n", "sqlite:"+filepath.Join(dir, "journal.db"))
	}
	m.writePlugin(0)
	n := rapid.IntRange(1, 3).Draw(rt, "pipelines")
	did.add(fmt.Sprintf("daemon of %d pipelines", n))
	var specs []pipeSpec
	for range n {
		specs = append(specs, m.newSpec(rt))
	}
	m.write(specs, false)
	cfg, err := config.Load(m.file)
	if err != nil {
		rt.Fatalf("initial config: %v", err)
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(m.logs, nil)), load.Open, nil)
	if err != nil {
		rt.Fatal(err)
	}
	app.SetSinkWrap(a, m.faults.wrap)
	m.a = a
	for _, s := range specs {
		m.pipes = append(m.pipes, &modelPipe{spec: s, paused: s.paused, variant: m.variant})
	}
	m.prod = b.Client(tb)
	ctx, cancel := context.WithCancel(context.Background())
	produce := make(chan struct{})
	go m.produce(produce)
	go func() { m.runErr = a.Run(ctx); close(m.done) }()
	go a.ReloadOn(ctx, m.hup)
	rt.Cleanup(func() {
		close(produce)
		cancel()
		select {
		case <-m.done:
		case <-time.After(time.Minute):
			rt.Error("Run did not return a minute after its context was cancelled")
		}
		_ = a.Close(context.Background())
		if rt.Failed() {
			l := m.logs.String()
			rt.Logf("sequence %d, daemon log:\n%s", seq, l[max(0, len(l)-6000):])
		}
	})
	m.waitStates(rt, "the start")
	return m
}

// newSpec is a new pipeline, of either kind.
func (m *controlModel) newSpec(rt *rapid.T) pipeSpec {
	s := pipeSpec{name: fmt.Sprintf("p%d", m.next), kind: pipeKind(rapid.IntRange(0, 1).Draw(rt, "kind"))}
	m.next++
	if s.kind == kindEO {
		in, out := testenv.Topic(m.tb, "in-"+s.name), testenv.Topic(m.tb, "out-"+s.name)
		m.b.CreateTopic(m.tb, in, 2)
		m.b.CreateTopic(m.tb, out, 2)
		topicsMu.Lock()
		m.topics[s.name] = [2]string{in, out}
		topicsMu.Unlock()
	}
	return s
}

// render is the config file of specs; broken puts an unknown key on its
// first line.
func (m *controlModel) render(specs []pipeSpec, broken bool) string {
	var b strings.Builder
	if broken {
		b.WriteString("bogus_key = 1\n")
	}
	b.WriteString(m.head)
	for _, s := range specs {
		fmt.Fprintf(&b, "\n[[pipeline]]\nname = %q\npaused = %v\n", s.name, s.paused)
		switch s.kind {
		case kindGen:
			fmt.Fprintf(&b, "shutdown_timeout = \"2s\"\n[pipeline.batch]\nmax_records = %d\n[pipeline.source]\ntype = \"generate\"\nrate = 200\n"+
				"[[pipeline.transform]]\ntype = \"wasm\"\npath = %q\n[pipeline.sink]\ntype = \"drop\"\n", 100+s.version, m.plugin)
		case kindEO:
			tp := m.topicsOf(s.name)
			fmt.Fprintf(&b, "delivery = \"exactly-once\"\nshutdown_timeout = \"5s\"\n[pipeline.batch]\nmax_records = %d\n"+
				"[pipeline.source]\ntype = \"kafka\"\ntopics = [%q]\ngroup = %q\n[pipeline.sink]\ntype = \"kafka\"\ntopic = %q\n",
				100+s.version, tp[0], tp[0]+"-g", tp[1])
		}
	}
	return b.String()
}

func (m *controlModel) write(specs []pipeSpec, broken bool) {
	if err := os.WriteFile(m.file, []byte(m.render(specs, broken)), 0o644); err != nil {
		m.tb.Fatal(err)
	}
}

func (m *controlModel) writePlugin(variant int) {
	bin := []byte("\x00asm not a module")
	m.broken = variant < 0
	if !m.broken {
		bin, m.variant = m.wasm[variant], variant
	}
	if err := os.WriteFile(m.plugin, bin, 0o644); err != nil {
		m.tb.Fatal(err)
	}
}

// produce writes to every exactly-once pipeline's input, 100 records a
// second each, until stop is closed.
func (m *controlModel) produce(stop chan struct{}) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, tp := range m.topicsNow() {
			for i := range 5 {
				m.prod.Produce(context.Background(), &kgo.Record{Topic: tp, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(n))}, nil)
			}
		}
	}
}

var topicsMu sync.Mutex

func (m *controlModel) topicsOf(name string) [2]string {
	topicsMu.Lock()
	defer topicsMu.Unlock()
	return m.topics[name]
}

func (m *controlModel) topicsNow() []string {
	topicsMu.Lock()
	defer topicsMu.Unlock()
	var out []string
	for _, tp := range m.topics {
		out = append(out, tp[0])
	}
	return out
}

// ---- the steps

// specs is the running config as a file would say it.
func (m *controlModel) specs() []pipeSpec {
	out := make([]pipeSpec, len(m.pipes))
	for i, p := range m.pipes {
		out[i] = p.spec
	}
	return out
}

// nextSpecs draws a valid new file: each pipeline kept, changed, paused
// or resumed, or removed, and maybe one added.
func (m *controlModel) nextSpecs(rt *rapid.T) []pipeSpec {
	var out []pipeSpec
	for _, s := range m.specs() {
		switch rapid.IntRange(0, 9).Draw(rt, "edit "+s.name) {
		case 0, 1, 2: // unchanged
		case 3, 4, 5, 6:
			s.version++
		case 7:
			s.paused = !s.paused
		case 8:
			continue // removed
		case 9:
			s.version++
			s.paused = !s.paused
		}
		out = append(out, s)
	}
	if len(out) < 3 && rapid.IntRange(0, 2).Draw(rt, "add") == 0 {
		out = append(out, m.newSpec(rt))
	}
	if len(out) == 0 && !m.journal {
		out = append(out, m.newSpec(rt)) // a config needs a pipeline without [journal]
	}
	return out
}

// expectReload is what a reload of next must do: refused (with the
// plugin file's error) when a pipeline it builds uses the broken plugin
// file, else the diff.
type reloadPlan struct {
	refused                                     bool
	unchanged, changed, added, removed, flipped []string
}

func (m *controlModel) plan(next []pipeSpec) reloadPlan {
	var pl reloadPlan
	for _, s := range next {
		i := slices.IndexFunc(m.pipes, func(p *modelPipe) bool { return p.spec.name == s.name })
		switch {
		case i < 0:
			pl.added = append(pl.added, s.name)
		case m.pipes[i].spec.version == s.version:
			pl.unchanged = append(pl.unchanged, s.name)
			if m.pipes[i].spec.paused != s.paused {
				pl.flipped = append(pl.flipped, s.name)
			}
			continue
		default:
			pl.changed = append(pl.changed, s.name)
		}
		if s.kind == kindGen && m.broken {
			pl.refused = true
		}
	}
	for _, p := range m.pipes {
		if !slices.ContainsFunc(next, func(s pipeSpec) bool { return s.name == p.spec.name }) {
			pl.removed = append(pl.removed, p.spec.name)
		}
	}
	return pl
}

// apply makes the model's running config next (a reload applied).
func (m *controlModel) apply(next []pipeSpec) {
	var pipes, unchanged []*modelPipe
	for _, s := range next {
		i := slices.IndexFunc(m.pipes, func(p *modelPipe) bool { return p.spec.name == s.name })
		if i < 0 {
			pipes = append(pipes, &modelPipe{spec: s, paused: s.paused, variant: m.variant})
			continue
		}
		p := m.pipes[i]
		if p.spec.paused != s.paused {
			p.paused = s.paused
		}
		if p.spec.version != s.version {
			p.restarts++
			p.failed = false
			p.variant = m.variant
		} else {
			unchanged = append(unchanged, p)
		}
		p.spec = s
		pipes = append(pipes, p)
	}
	m.pipes = pipes
	m.swapPlugins(unchanged)
}

// swapPlugins is what a reload does to the plugins of unchanged pipelines
// (ps): a gen pipeline whose plugin file has another build now swaps it
// in, and a failed one then starts again by itself (revive.go).
func (m *controlModel) swapPlugins(ps []*modelPipe) {
	if m.broken {
		return // the running versions stay
	}
	for _, p := range ps {
		if p.spec.kind != kindGen || p.variant == m.variant {
			continue
		}
		p.variant = m.variant
		if p.failed {
			did.add("failed pipeline revived by a plugin reload")
			p.failed = false
			p.restarts++
			p.autoRestarts++
		}
	}
}

// doReload writes next (broken or not), reloads, and checks the answer.
func (m *controlModel) doReload(rt *rapid.T, what string, next []pipeSpec, broken bool) {
	m.write(next, broken)
	pl := m.plan(next)
	r := answer(rt, what, func() reloadAnswer { res, err := m.a.Reload(context.Background()); return reloadAnswer{res, err} })
	m.checkReload(rt, what, r, next, broken, pl)
}

func (m *controlModel) checkReload(rt *rapid.T, what string, r reloadAnswer, next []pipeSpec, broken bool, pl reloadPlan) {
	if m.exited {
		if r.err == nil || !strings.Contains(r.err.Error(), "shutting down") {
			rt.Fatalf("%s after the daemon exited: %+v %v, want shutting down", what, r.res, r.err)
		}
		return
	}
	switch {
	case broken:
		if r.err == nil || !strings.Contains(r.res.Error, m.file+":1:") {
			rt.Fatalf("%s: %+v %v, want refused at %s:1", what, r.res, r.err, m.file)
		}
		m.setLastReload(false)
	case pl.refused:
		if r.err == nil || !strings.Contains(r.res.Error, "identity.wasm") {
			rt.Fatalf("%s (the plugin file is broken): %+v %v, want refused naming it", what, r.res, r.err)
		}
		m.setLastReload(false)
	default:
		got := fmt.Sprint(r.res.Unchanged, r.res.Changed, r.res.Added, r.res.Removed, append(r.res.Paused, r.res.Resumed...))
		want := fmt.Sprint(nonNil(pl.unchanged), nonNil(pl.changed), nonNil(pl.added), nonNil(pl.removed), sortedFlips(pl.flipped, next))
		if r.err != nil || !r.res.OK || got != want {
			rt.Fatalf("%s: %+v %v\ngot  unchanged changed added removed flipped %s\nwant %s", what, r.res, r.err, got, want)
		}
		m.apply(next)
		m.setLastReload(true)
		m.exitIfAllFailed()
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// sortedFlips is flipped in the order the answer lists them: paused,
// then resumed.
func sortedFlips(flipped []string, next []pipeSpec) []string {
	var paused, resumed []string
	for _, n := range flipped {
		i := slices.IndexFunc(next, func(s pipeSpec) bool { return s.name == n })
		if next[i].paused {
			paused = append(paused, n)
		} else {
			resumed = append(resumed, n)
		}
	}
	return append(paused, resumed...)
}

func (m *controlModel) setLastReload(ok bool) { m.lastReload = &ok }

// exitIfAllFailed: a daemon whose every pipeline failed (none restarting
// by itself) has ended its work.
func (m *controlModel) exitIfAllFailed() {
	if len(m.pipes) == 0 {
		return
	}
	for _, p := range m.pipes {
		if !p.failed {
			return
		}
	}
	m.exited = true
}

func (m *controlModel) reload(rt *rapid.T) {
	m.steps++
	next := m.nextSpecs(rt)
	switch pl := m.plan(next); {
	case m.exited:
		did.add("reload after the exit")
	case len(next) == 0:
		did.add("reload removing the last pipeline")
	case len(m.pipes) == 1 && len(pl.changed) == 1:
		did.add("reload changing the only pipeline")
	default:
		did.add("reload")
	}
	m.doReload(rt, "reload", next, false)
}

// reloadRemovingAll removes every pipeline: the daemon (with [journal],
// where a config may have none) keeps running with none; without, the
// file has one new pipeline instead.
func (m *controlModel) reloadRemovingAll(rt *rapid.T) {
	m.steps++
	var next []pipeSpec
	if m.journal {
		did.add("reload removing the last pipeline")
	} else {
		did.add("reload replacing every pipeline")
		next = append(next, m.newSpec(rt))
	}
	m.doReload(rt, "reload removing every pipeline", next, false)
}

func (m *controlModel) reloadBroken(rt *rapid.T) {
	m.steps++
	did.add("reload of a broken file")
	m.doReload(rt, "reload of a broken file", m.nextSpecs(rt), true)
}

// pick draws a pipeline of the running config, or nil.
func (m *controlModel) pick(rt *rapid.T, what string) *modelPipe {
	if len(m.pipes) == 0 {
		return nil
	}
	return m.pipes[rapid.IntRange(0, len(m.pipes)-1).Draw(rt, what)]
}

type ctlAnswer struct {
	changed bool
	err     error
}

func (m *controlModel) setPaused(rt *rapid.T, paused bool) {
	m.steps++
	p := m.pick(rt, "pipeline")
	if p == nil {
		return
	}
	what, f := "pause", m.a.Pause
	if !paused {
		what, f = "resume", m.a.Resume
	}
	what += " " + p.spec.name
	r := answer(rt, what, func() ctlAnswer { c, err := f(p.spec.name); return ctlAnswer{c, err} })
	switch {
	case m.exited:
		if r.err == nil {
			rt.Fatalf("%s after the daemon exited: answered %v", what, r.changed)
		}
	case p.failed:
		if !errors.Is(r.err, app.ErrNotRunning) {
			rt.Fatalf("%s of a failed pipeline: %v %v, want ErrNotRunning", what, r.changed, r.err)
		}
	default:
		did.add(what[:strings.IndexByte(what, ' ')])
		if r.err != nil || r.changed != (p.paused != paused) {
			rt.Fatalf("%s: %v %v, want changed %v", what, r.changed, r.err, p.paused != paused)
		}
		p.paused = paused
	}
}

func (m *controlModel) pause(rt *rapid.T)  { m.setPaused(rt, true) }
func (m *controlModel) resume(rt *rapid.T) { m.setPaused(rt, false) }

func (m *controlModel) restart(rt *rapid.T) {
	m.steps++
	p := m.pick(rt, "pipeline")
	if p == nil {
		return
	}
	what := "restart " + p.spec.name
	err := answer(rt, what, func() error { return m.a.Restart(context.Background(), p.spec.name) })
	switch {
	case m.exited:
		if err == nil {
			rt.Fatalf("%s after the daemon exited: done", what)
		}
	case p.spec.kind == kindGen && m.broken:
		if err == nil || !strings.Contains(err.Error(), "identity.wasm") {
			rt.Fatalf("%s with its plugin file broken: %v, want the load error", what, err)
		}
	case err != nil:
		rt.Fatalf("%s: %v", what, err)
	default:
		did.add("restart")
		p.restarts++
		p.failed = false
		p.variant = m.variant
	}
}

// sighup writes a new file (broken or not) and sends a burst of SIGHUPs,
// as the OS delivers them to signal.Notify (one waits, the rest are
// dropped while it does); the daemon must end up as after one reload of
// the file.
func (m *controlModel) sighup(rt *rapid.T) {
	m.steps++
	next := m.nextSpecs(rt)
	broken := rapid.IntRange(0, 3).Draw(rt, "broken") == 0
	n := rapid.IntRange(1, 5).Draw(rt, "signals")
	m.write(next, broken)
	pl := m.plan(next)
	did.add(fmt.Sprintf("sighup burst of %d", n))
	before := m.a.Status().LastReload
	for range n {
		select {
		case m.hup <- syscall.SIGHUP:
		default:
		}
		time.Sleep(time.Duration(rapid.IntRange(0, 20).Draw(rt, "gap ms")) * time.Millisecond)
	}
	if m.exited {
		return // the reload loop's Reload answers shutting down, and logs it
	}
	// Quiet: the signal taken, no operation running or in line, for a
	// while, and a reload done since the burst.
	deadline := time.Now().Add(answerWithin)
	for quiet := 0; quiet < 3; time.Sleep(20 * time.Millisecond) {
		last := m.a.Status().LastReload
		if len(m.hup) == 0 && app.Idle(m.a) && last != nil && (before == nil || last.At.After(before.At)) {
			quiet++
		} else {
			quiet = 0
		}
		if time.Now().After(deadline) {
			rt.Fatalf("SIGHUP x%d: not answered within %v (last reload %+v)", n, answerWithin, last)
		}
	}
	last := m.a.Status().LastReload
	what := fmt.Sprintf("SIGHUP x%d", n)
	if last.OK && !broken && !pl.refused && len(last.Changed)+len(last.Added)+len(last.Removed)+len(last.Paused)+len(last.Resumed) == 0 &&
		len(pl.changed)+len(pl.added)+len(pl.removed)+len(pl.flipped) > 0 {
		// Two reloads of the file: the first applied it, the second
		// found nothing to do. The states checked next tell.
		if want := names(next); fmt.Sprint(last.Unchanged) != fmt.Sprint(want) {
			rt.Fatalf("%s: the last reload %+v, want every pipeline of %v unchanged", what, *last, want)
		}
		m.apply(next)
		m.setLastReload(true)
		m.exitIfAllFailed()
		return
	}
	m.checkReload(rt, what, reloadAnswer{res: *last, err: errIf(!last.OK, last.Error)}, next, broken, pl)
}

func names(specs []pipeSpec) []string {
	out := []string{}
	for _, s := range specs {
		out = append(out, s.name)
	}
	return out
}

func errIf(b bool, msg string) error {
	if b {
		return errors.New(msg)
	}
	return nil
}

// pluginReload replaces the gen pipelines' plugin file with another valid
// build of it, or a broken file, and reloads an unchanged config: the
// running pipelines swap the new build in, or warn and keep theirs.
func (m *controlModel) pluginReload(rt *rapid.T) {
	m.steps++
	variant := rapid.IntRange(-1, 1).Draw(rt, "variant")
	m.writePlugin(variant)
	did.add("plugin hot reload")
	specs := m.specs()
	m.write(specs, false)
	r := answer(rt, "plugin hot reload", func() reloadAnswer { res, err := m.a.Reload(context.Background()); return reloadAnswer{res, err} })
	if m.exited {
		m.checkReload(rt, "plugin hot reload", r, specs, false, reloadPlan{})
		return
	}
	gens := 0
	for _, p := range m.pipes {
		if p.spec.kind == kindGen {
			gens++
		}
	}
	warned := 0
	for _, w := range r.res.Warnings {
		if strings.Contains(w, "the running version stays") {
			warned++
		}
	}
	switch {
	case r.err != nil || !r.res.OK || len(r.res.Changed)+len(r.res.Added)+len(r.res.Removed) > 0:
		rt.Fatalf("plugin hot reload: %+v %v, want applied, nothing changed", r.res, r.err)
	case m.broken && warned != gens:
		rt.Fatalf("plugin hot reload of a broken file: %d warnings %q, want one per gen pipeline (%d)", warned, r.res.Warnings, gens)
	case !m.broken && warned != 0:
		rt.Fatalf("plugin hot reload: warnings %q", r.res.Warnings)
	}
	m.setLastReload(true)
	m.swapPlugins(m.pipes)
}

// fail injects a failure into a running, unpaused pipeline: an
// exactly-once one fails inside a transaction and must restart by itself
// (with every reload before it kept); another fails under policy stop
// and stays failed (the daemon ends when all have).
func (m *controlModel) fail(rt *rapid.T) {
	m.steps++
	p := m.pickRunning(rt)
	if p == nil {
		return
	}
	m.inject(rt, p)
	if p.spec.kind == kindEO {
		did.add("failure inside a transaction")
		m.waitAutoRestart(rt, p)
	} else {
		did.add("failure (policy stop)")
	}
}

// pickRunning draws a pipeline that runs unpaused, or nil.
func (m *controlModel) pickRunning(rt *rapid.T) *modelPipe {
	var ps []*modelPipe
	for _, p := range m.pipes {
		if !p.failed && !p.paused {
			ps = append(ps, p)
		}
	}
	if m.exited || len(ps) == 0 {
		return nil
	}
	return ps[rapid.IntRange(0, len(ps)-1).Draw(rt, "running pipeline")]
}

// inject arms p's sink and waits until p failed.
func (m *controlModel) inject(rt *rapid.T, p *modelPipe) {
	if p.spec.kind == kindEO {
		// A run that committed restarts after restartMin, not a longer
		// backoff.
		m.waitFor(rt, p.spec.name+" committing", func(ps app.PipelineStatus) bool {
			return ps.State == "running" && ps.Transactions != nil && ps.Transactions.Committed > 0
		})
		m.faults.arm(p.spec.name, faultTransient)
	} else {
		m.faults.arm(p.spec.name, faultFatal)
	}
	m.waitFor(rt, p.spec.name+" failed", func(ps app.PipelineStatus) bool {
		return ps.State == "failed" || ps.AutoRestarts > p.autoRestarts
	})
	if p.spec.kind == kindGen {
		p.failed = true
		m.exitIfAllFailed()
	}
}

func (m *controlModel) waitAutoRestart(rt *rapid.T, p *modelPipe) {
	p.restarts++
	p.autoRestarts++
	m.waitFor(rt, p.spec.name+" restarted by itself", func(ps app.PipelineStatus) bool {
		return ps.AutoRestarts == p.autoRestarts && ps.RestartAt.IsZero()
	})
}

// reloadInBackoff fails an exactly-once pipeline inside a transaction and
// reloads while its automatic restart waits for its backoff: a reload that
// changes it replaces it at once (the automatic restart then does
// nothing); one that does not leaves the automatic restart to build it
// from the reloaded config.
func (m *controlModel) reloadInBackoff(rt *rapid.T) {
	m.steps++
	var eos []*modelPipe
	for _, p := range m.pipes {
		if p.spec.kind == kindEO && !p.failed && !p.paused {
			eos = append(eos, p)
		}
	}
	if m.exited || len(eos) == 0 {
		return
	}
	p := eos[rapid.IntRange(0, len(eos)-1).Draw(rt, "eo pipeline")]
	m.inject(rt, p)
	st := m.statusOf(rt, p.spec.name)
	if time.Until(st.RestartAt) < 500*time.Millisecond {
		m.waitAutoRestart(rt, p) // too late to reload in the backoff
		return
	}
	did.add("reload in a backoff")
	next := m.nextSpecs(rt)
	i := slices.IndexFunc(next, func(s pipeSpec) bool { return s.name == p.spec.name })
	replaced := i >= 0 && next[i].version != p.spec.version
	m.doReload(rt, "reload in a backoff", next, false)
	if m.lastReload != nil && *m.lastReload && (replaced || i < 0) {
		if i >= 0 { // replaced by the reload: carries the counts, no automatic one
			m.waitFor(rt, p.spec.name+" replaced in its backoff", func(ps app.PipelineStatus) bool { return ps.RestartAt.IsZero() })
		}
		return
	}
	m.waitAutoRestart(rt, p)
}

// pauseInReload pauses a pipeline while a reload that changes it runs:
// the pipeline that replaces it starts paused.
func (m *controlModel) pauseInReload(rt *rapid.T) {
	m.steps++
	p := m.pickRunning(rt)
	if p == nil {
		return
	}
	next := m.specs()
	i := slices.IndexFunc(next, func(s pipeSpec) bool { return s.name == p.spec.name })
	next[i].version++
	m.write(next, false)
	pl := m.plan(next)
	did.add("pause in a reload")
	res := make(chan reloadAnswer, 1)
	go func() { r, err := m.a.Reload(context.Background()); res <- reloadAnswer{r, err} }()
	time.Sleep(time.Duration(rapid.IntRange(0, 30).Draw(rt, "pause after ms")) * time.Millisecond)
	r := answer(rt, "pause in a reload", func() ctlAnswer { c, err := m.a.Pause(p.spec.name); return ctlAnswer{c, err} })
	if r.err != nil || !r.changed {
		rt.Fatalf("pause of %s during a reload: %v %v, want paused", p.spec.name, r.changed, r.err)
	}
	var ra reloadAnswer
	select {
	case ra = <-res:
	case <-time.After(answerWithin):
		rt.Fatalf("the reload during a pause: no answer within %v", answerWithin)
	}
	m.checkReload(rt, "reload during a pause", ra, next, false, pl)
	p.paused = true
}

// ---- checks

// check is the invariant checked after every step: the daemon exited if
// and only if it must have, and otherwise runs the model's config, each
// pipeline in its state with its pause and restart counts.
func (m *controlModel) check(rt *rapid.T) {
	if m.exited {
		select {
		case <-m.done:
		case <-time.After(answerWithin):
			rt.Fatalf("every pipeline failed, and the daemon did not exit within %v", answerWithin)
		}
		if !m.counted {
			m.counted = true
			did.add("daemon exits after its last pipeline failed")
		}
		if m.runErr == nil || !strings.Contains(m.runErr.Error(), "injected") {
			rt.Fatalf("the daemon exited with %v, want the injected failures", m.runErr)
		}
		return
	}
	m.waitStates(rt, "after the step")
}

// waitStates waits until the daemon's pipelines are the model's (bounded),
// and fails if the daemon exited.
func (m *controlModel) waitStates(rt *rapid.T, when string) {
	deadline := time.Now().Add(answerWithin)
	for {
		select {
		case <-m.done:
			rt.Fatalf("%s: the daemon exited: %v", when, m.runErr)
		default:
		}
		msg := m.mismatch()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("%s: %s", when, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mismatch says how the daemon differs from the model, "" if it does not.
func (m *controlModel) mismatch() string {
	st := m.a.Status()
	var names, want []string
	for _, p := range st.Pipelines {
		names = append(names, p.Name)
	}
	for _, p := range m.pipes {
		want = append(want, p.spec.name)
	}
	if !slices.Equal(names, want) {
		return fmt.Sprintf("pipelines %v, want %v", names, want)
	}
	if r := st.LastReload; m.lastReload != nil && (r == nil || r.OK != *m.lastReload) {
		return fmt.Sprintf("last reload %+v, want ok %v", r, *m.lastReload)
	}
	for i, p := range m.pipes {
		ps := st.Pipelines[i]
		state := "running"
		if p.failed {
			state = "failed"
		}
		switch {
		case string(ps.State) != state:
			return fmt.Sprintf("%s is %s (%s), want %s", p.spec.name, ps.State, ps.Reason, state)
		case !p.failed && ps.Paused != p.paused:
			return fmt.Sprintf("%s paused %v, want %v", p.spec.name, ps.Paused, p.paused)
		case ps.Restarts != p.restarts || ps.AutoRestarts != p.autoRestarts:
			return fmt.Sprintf("%s restarts %d (automatic %d), want %d (%d)", p.spec.name, ps.Restarts, ps.AutoRestarts, p.restarts, p.autoRestarts)
		}
	}
	return ""
}

func (m *controlModel) statusOf(rt *rapid.T, name string) app.PipelineStatus {
	for _, p := range m.a.Status().Pipelines {
		if p.Name == name {
			return p
		}
	}
	rt.Fatalf("no pipeline %s", name)
	return app.PipelineStatus{}
}

// waitFor waits until the named pipeline's status satisfies ok.
func (m *controlModel) waitFor(rt *rapid.T, what string, ok func(app.PipelineStatus) bool) {
	name := strings.Fields(what)[0]
	deadline := time.Now().Add(answerWithin + 5*time.Second)
	for {
		st := m.statusOf(rt, name)
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("%s: not within %v: %+v", what, answerWithin, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answer runs f, and fails rt if it does not return within answerWithin.
func answer[T any](rt *rapid.T, what string, f func() T) T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(answerWithin):
		rt.Fatalf("%s: no answer within %v", what, answerWithin)
	}
	var zero T
	return zero
}

// ---- the fault injector

type fault int

const (
	faultNone      fault = iota
	faultTransient       // a write fails transiently: inside a transaction, the pipeline fails and restarts
	faultFatal           // a record is refused: under policy stop, the pipeline fails
)

// faultInjector wraps every pipeline's sink; an armed pipeline's next
// write fails once.
type faultInjector struct {
	mu    sync.Mutex
	armed map[string]fault
}

func (f *faultInjector) arm(pipeline string, k fault) {
	f.mu.Lock()
	f.armed[pipeline] = k
	f.mu.Unlock()
}

func (f *faultInjector) take(pipeline string) fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.armed[pipeline]
	delete(f.armed, pipeline)
	return k
}

func (f *faultInjector) wrap(pipeline string, s plugins.Sink) plugins.Sink {
	return plugins.SinkFunc(func(ctx context.Context, batch []record.Record) ([]error, error) {
		switch f.take(pipeline) {
		case faultTransient:
			errs := make([]error, len(batch))
			for i := range errs {
				errs[i] = plugins.Transient(errors.New("injected: the broker fenced the producer"))
			}
			return errs, nil
		case faultFatal:
			errs := make([]error, len(batch))
			errs[0] = errors.New("injected: record refused")
			return errs, nil
		}
		return s.Write(ctx, batch)
	})
}
