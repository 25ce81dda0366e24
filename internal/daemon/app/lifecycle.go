package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/internal/daemon/admin"
	"github.com/streamd/streamd/internal/daemon/embedded"
	"github.com/streamd/streamd/journal"
)

// The daemon's lifecycle, written in one place: what Run does, the states
// of the units it runs, the operations that change them, and the rules
// they keep.
//
// Run starts the embedded broker, opens the admin listener (so that
// /healthz answers from the start), opens the journal and starts the fluid
// bridge, then launches every pipeline. A pipeline that Build built starts
// at once; one that New made is built first, its plugins loaded, each
// within [plugins] load_timeout: every pipeline at once, each starting as
// soon as it is built, so that a plugin that loads slowly, or never,
// delays only its own pipeline, and one that fails to load fails only its
// own (shown as loading, then failed with the cause, by /readyz,
// /pipelines and /v1/status).
//
// A unit (units.go) is one pipeline of the running config, in one of four
// states:
//
//	loading  being built, or built and not started yet
//	running  its pipeline runs
//	ended    its pipeline returned (done, stopped or failed), or its build
//	         failed; an exactly-once pipeline that failed inside a
//	         transaction has an automatic restart due (autorestart.go),
//	         another that failed waits for one of its plugins to be hot
//	         reloaded (revive.go)
//	leaving  an operation drains it to replace or remove it
//
// Operations change which units there are: a reload (SIGHUP, POST
// /v1/reload, streamd ctl reload: reload.go), a restart (POST
// /v1/pipelines/NAME/restart: control.go) and the automatic restarts. They
// run one at a time, in the order asked, on a goroutine of their own
// (runOps), once Run has launched the pipelines. A request waits in line
// while another operation runs; requests for the same thing that wait
// together are served by one run (SIGHUPs sent during a reload make one
// more reload after it). Pause and resume wait for nothing: they apply at
// once, to the pipeline and to the state its replacement starts in.
//
// The rules:
//
//  1. Every control request is answered within a bound: done, refused
//     with its reason, or ErrBusy when its caller's deadline passed while
//     it waited in line (it is then dropped, unless another caller waits
//     for it). An operation is bounded by its plugins' load timeout and
//     its pipelines' shutdown_timeout.
//  2. No lock is held while waiting for a unit or an operation: a.mu
//     guards the lifecycle's state and is held only to read or change it;
//     pauseMu orders pauses and resumes with replacements, and is held only
//     around a pipeline's Pause or Resume, which do not block. pauseMu is
//     taken before a.mu, never while a.mu is held.
//  3. A refused reload changes nothing: the units it would start are all
//     built before any running one is touched, and released if one of them
//     fails to build.
//  4. The daemon ends only when Run's context is done (a stop), or when its
//     work has ended for good: no operation running or in line, at least
//     one unit, every unit ended with no automatic restart due, and one of
//     them failed or the daemon serves nothing else (the fluid bridge, the
//     journal API). A unit that leaves for an operation is never "ended"
//     for this rule, and a daemon whose last pipeline a reload removed runs
//     until it is stopped.
//  5. An automatic restart (after a failure inside a transaction, or of a
//     failed pipeline whose plugin was hot reloaded) is an operation in
//     line like the others: it builds from the running config (every
//     reload before it applied) and does nothing if its unit was replaced
//     meanwhile.
//  6. A pipeline's pause holds across its replacement: a pipeline
//     restarted (by hand or automatically) or replaced by a reload starts
//     paused if it was, unless the reload changed its `paused` in the file.

// unitState is where a unit is in its life (above).
type unitState uint8

const (
	unitLoading unitState = iota
	unitRunning
	unitEnded
	unitLeaving
)

func (s unitState) String() string {
	return [...]string{"loading", "running", "ended", "leaving"}[s]
}

// phase is where Run is.
type phase uint8

const (
	phaseBuilt    phase = iota // Run was not called
	phaseStarting              // Run starts the broker, the listener, the journal, fluid
	phaseRunning               // the pipelines are launched; operations run
	phaseStopping              // Run is ending: no operation starts, the units drain
	phaseStopped               // Run returned
)

// opKind is what an operation does.
type opKind uint8

const (
	opReload      opKind = iota
	opRestart            // by hand
	opAutoRestart        // after a failure inside a transaction (autorestart.go)
	opRevive             // of a failed pipeline whose plugin was hot reloaded (revive.go)
)

func (k opKind) String() string {
	return [...]string{"reload", "restart", "automatic restart", "restart after a plugin reload"}[k]
}

// op is an operation in line or running.
type op struct {
	kind opKind
	name string // the pipeline a restart restarts
	unit *unit  // the unit an automatic restart (or a revival) restarts
	// waiters counts the callers waiting for it; an automatic restart
	// has none and is never dropped.
	waiters int
	started time.Time // zero while in line
	done    chan struct{}
	// Its result, once done is closed.
	res ReloadResult
	err error
}

func (o *op) String() string {
	if o.name != "" {
		return o.kind.String() + " of " + o.name
	}
	return o.kind.String()
}

// ErrBusy answers a request whose caller's deadline passed while it waited
// in line behind other operations; it was not run.
var ErrBusy = errors.New("busy")

var errShuttingDown = errors.New("streamd is shutting down")

// Run starts the embedded broker (if configured), the admin server, the
// journal and the fluid bridge, and runs every pipeline until ctx is done
// or the daemon's work has ended (see the rules above). It returns the
// errors of the pipelines that failed.
func (a *App) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.phase != phaseBuilt {
		a.mu.Unlock()
		return errors.New("app: Run called twice")
	}
	a.phase = phaseStarting
	a.mu.Unlock()
	if err := a.startParts(ctx); err != nil {
		a.mu.Lock()
		a.phase = phaseStopped
		a.mu.Unlock()
		return err
	}
	return a.runUnits(ctx)
}

// startParts starts what the pipelines run beside: the embedded broker,
// the admin listener, the journal and the fluid bridge. Until it is done,
// /readyz answers 503 "starting" with what it is starting, and the journal
// API and the fluid bridge answer 503 with Retry-After.
func (a *App) startParts(ctx context.Context) error {
	defer a.setStarting("")
	a.setStarting("starting the embedded broker")
	if e := a.cfg.Kafka.Embedded; e != nil {
		b, err := embedded.Start(embedded.Config{Listen: e.Listen, DataDir: e.DataDir, SyncWrites: e.SyncWrites, Partitions: a.cfg.Kafka.Partitions,
			Logger: a.log.With("broker", "embedded"), Retention: e.Retention.Duration, RetentionBytes: e.RetentionBytes,
			SegmentBytes: e.SegmentBytes, DiskBudget: e.DiskBudgetBytes, RetentionCheck: e.RetentionCheckInterval.Duration})
		if err != nil {
			return err
		}
		a.reg.MustRegister(b.Collector())
		a.broker = b
		a.brokerp.Store(b)
		a.log.Info("embedded broker started", "listen", b.ListenAddrs(), "data_dir", e.DataDir)
	}
	// Mounted before the listener opens, answering 503 until they start
	// (their routes listed as the handlers they stand for list them).
	journalAPI := lateHandler{routes: routesOf(journal.Handler(nil))}
	fluidAPI := lateHandler{routes: routesOf((*fluid.Bridge)(nil).Handler())}
	if a.cfg.Journal != nil {
		a.Admin.Handle("/journal/", &journalAPI)
	}
	if a.cfg.Fluid != nil {
		// As sent: the bridge answers unclean paths (an empty topic in
		// /fluid/topics//...) with 400 itself, not the mux's redirect.
		a.Admin.HandlePrefix("/fluid/", &fluidAPI)
	}
	a.setStarting("opening the admin listener")
	if a.cfg.Admin.Listen != "" {
		addr, err := a.Admin.Start(a.cfg.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin listen %s: %w", a.cfg.Admin.Listen, err)
		}
		a.AdminAddr = addr
		a.log.Info("admin server listening", "addr", addr, "tls", a.Admin.TLS(), "auth", a.cfg.Admin.Auth != nil)
		if a.console != nil {
			a.console.Start()
			a.log.Info("console", "url", a.consoleURL())
		}
	}
	a.setStarting("opening the journal store")
	if err := a.startJournal(ctx, &journalAPI); err != nil {
		return err
	}
	a.setStarting("starting the fluid bridge")
	return a.startFluid(ctx, &fluidAPI)
}

func (a *App) setStarting(what string) { a.starting.Store(&what) }

// startingWhat is what Run is starting, "" when it is not (before Run, or
// once the pipelines are launched).
func (a *App) startingWhat() string {
	if p := a.starting.Load(); p != nil {
		return *p
	}
	return ""
}

// lateHandler answers 503 until its handler is set; it lists the routes
// of that handler (admin.Router).
type lateHandler struct {
	h      atomic.Pointer[http.Handler]
	routes []string
}

// Routes implements admin.Router.
func (l *lateHandler) Routes() []string { return l.routes }

// routesOf is what h lists as an admin.Router, nil if it is not one.
func routesOf(h http.Handler) []string {
	if r, ok := h.(admin.Router); ok {
		return r.Routes()
	}
	return nil
}

func (l *lateHandler) set(h http.Handler) { l.h.Store(&h) }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "starting")
}

// runUnits launches every unit and waits until ctx is done or the
// daemon's work has ended (rule 4); then it lets the operation running
// finish, answers those in line errShuttingDown, waits for every unit to
// end, and returns the errors of those that failed.
func (a *App) runUnits(ctx context.Context) error {
	a.mu.Lock()
	a.runCtx = ctx
	if a.wake == nil {
		a.wake = make(chan struct{}, 1)
	}
	a.phase = phaseRunning
	units := slices.Clone(a.units)
	a.startOps()
	a.mu.Unlock()
	for _, u := range units {
		a.launch(u)
	}
	for {
		a.mu.Lock()
		if ctx.Err() != nil || a.finished() {
			a.phase = phaseStopping
			a.mu.Unlock()
			break
		}
		a.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-a.wake:
		}
	}
	// Wait for the operation running, if any (runOps answers those in
	// line and returns).
	for {
		a.mu.Lock()
		idle := !a.working
		a.mu.Unlock()
		if idle {
			break
		}
		<-a.wake
	}
	a.mu.Lock()
	units = slices.Clone(a.units)
	for _, u := range units {
		if u.timer != nil {
			u.timer.Stop()
			u.timer = nil
		}
	}
	a.mu.Unlock()
	// Every unit runs (or loads) under ctx: when the daemon stops they
	// drain; when its work ended they have ended.
	var errs []error
	for _, u := range units {
		a.mu.Lock()
		done := u.done
		a.mu.Unlock()
		if done != nil {
			<-done
		}
		a.mu.Lock()
		if u.err != nil {
			errs = append(errs, u.err)
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	a.phase = phaseStopped
	a.mu.Unlock()
	return errors.Join(errs...)
}

// finished reports whether the daemon's work has ended for good (rule 4);
// a.mu must be held.
func (a *App) finished() bool {
	if a.working || len(a.queue) > 0 || len(a.units) == 0 {
		return false
	}
	failed := false
	for _, u := range a.units {
		if u.state != unitEnded || !u.restartAt.IsZero() {
			return false
		}
		failed = failed || u.err != nil
	}
	serves := a.cfg.Fluid != nil || (a.cfg.Journal != nil && a.cfg.Admin.Listen != "")
	return failed || !serves
}

// poke tells runUnits to look again.
func (a *App) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// launch builds u if it is not built yet (its plugins loaded within their
// load timeout; in the background), and starts it.
func (a *App) launch(u *unit) {
	a.mu.Lock()
	if u.built {
		a.mu.Unlock()
		a.start(u)
		return
	}
	ctx, cancel := context.WithCancel(a.runCtx)
	u.cancel, u.done, u.since = cancel, make(chan struct{}), time.Now()
	a.mu.Unlock()
	go func() {
		defer cancel() // start gave the run a context of its own
		err := a.build(ctx, u, a.cl)
		if err != nil {
			if ctx.Err() != nil {
				err = nil // stopped while it loaded
			} else {
				a.log.Error("pipeline failed to load; the others run", "pipeline", u.name, "err", err)
			}
			a.ended(u, err, ctx.Err() != nil, nil)
			return
		}
		a.start(u)
	}()
}

// start runs the built unit u's pipeline (made now if it was not) under
// Run's context, paused if u is wanted paused; a unit told to leave, or a
// daemon stopping, ends it at once instead.
func (a *App) start(u *unit) {
	a.make(u)
	a.pauseMu.Lock()
	defer a.pauseMu.Unlock()
	a.mu.Lock()
	if u.done == nil {
		u.done = make(chan struct{})
	}
	if u.state == unitLeaving || a.phase >= phaseStopping {
		a.mu.Unlock()
		a.ended(u, nil, true, nil)
		return
	}
	ctx, cancel := context.WithCancel(a.runCtx)
	u.state, u.cancel, u.err, u.since, u.ran = unitRunning, cancel, nil, time.Now(), true
	p, paused := u.p, u.paused
	a.mu.Unlock()
	if paused {
		p.Pause()
	} else {
		p.Resume()
	}
	go func() {
		err := p.Run(ctx)
		var ws []reloadWatch
		if err != nil {
			err = fmt.Errorf("pipeline %s: %w", u.name, err)
			if ctx.Err() == nil {
				ws = reloadWatches(u.loaded) // before it ends: then it may be released
			}
		}
		a.ended(u, err, ctx.Err() != nil, ws)
	}()
}

// ended records that u's pipeline returned err (or its build failed with
// err); cancelled says it was told to stop (by an operation, or because
// the daemon stops), which never restarts it. A pipeline that failed
// otherwise restarts by itself after a backoff if it failed inside a
// transaction (autorestart.go), else when one of ws, its plugins, is hot
// reloaded (revive.go).
func (a *App) ended(u *unit, err error, cancelled bool, ws []reloadWatch) {
	a.mu.Lock()
	u.err = err
	if u.state != unitLeaving {
		u.state = unitEnded
		if err != nil && !cancelled && a.phase == phaseRunning && !a.autoRestart(u, err) {
			go a.reviveOnReload(a.runCtx, u, err, ws)
		}
	}
	done := u.done
	a.mu.Unlock()
	close(done)
	a.poke()
}

// stop makes u leave: it drains u's pipeline as on SIGTERM (in-flight
// records are written and committed within its shutdown timeout), or ends
// its build, waits for it, and releases everything built for it.
func (a *App) stop(u *unit) {
	a.mu.Lock()
	u.state = unitLeaving
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
	}
	cancel, done := u.cancel, u.done
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	a.mu.Lock()
	p, ran := u.p, u.ran
	a.mu.Unlock()
	ctx, cancelRel := u.closeContext(p)
	defer cancelRel()
	var err error
	if !ran && u.src != nil {
		err = u.src.Close(ctx) // never run: the pipeline did not close it
	}
	if err = errors.Join(err, u.release(ctx)); err != nil {
		a.log.Warn("close", "pipeline", u.name, "err", err)
	}
	if p != nil {
		a.metrics.Remove(p)
	}
}

// startOps starts runOps if operations wait and none runs; a.mu must be
// held.
func (a *App) startOps() {
	if !a.working && len(a.queue) > 0 && a.phase == phaseRunning {
		a.working = true
		go a.runOps()
	}
}

// submitRevive puts the restart of u after a plugin reload in line.
func (a *App) submitRevive(u *unit) (*op, error) { return a.submit(opRevive, u.name, u) }

// submit puts an operation in line and returns it: a reload or restart
// joins one of the same kind (and pipeline) that waits in line, not
// started yet; an automatic restart of auto never does.
func (a *App) submit(kind opKind, name string, auto *unit) (*op, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.phase >= phaseStopping {
		return nil, errShuttingDown
	}
	if auto == nil {
		for _, o := range a.queue {
			if o.kind == kind && o.name == name && o.unit == nil {
				o.waiters++
				return o, nil
			}
		}
	}
	o := &op{kind: kind, name: name, unit: auto, done: make(chan struct{})}
	if auto == nil {
		o.waiters = 1
	}
	a.queue = append(a.queue, o)
	a.startOps()
	return o, nil
}

// await waits until o has run, or ctx is done: then the caller gets
// ErrBusy, and o leaves the line if no one else waits for it and it has
// not started.
func (a *App) await(ctx context.Context, o *op) error {
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-o.done:
		return nil
	default:
	}
	o.waiters--
	if !o.started.IsZero() {
		return fmt.Errorf("%w: the %s asked for is still running (for %s): see /v1/status for its result",
			ErrBusy, o, time.Since(o.started).Round(time.Millisecond))
	}
	if o.waiters == 0 {
		a.queue = slices.DeleteFunc(a.queue, func(x *op) bool { return x == o })
		a.poke()
	}
	what := "the daemon is starting"
	if a.current != nil {
		what = fmt.Sprintf("a %s has been running for %s", a.current, time.Since(a.current.started).Round(time.Millisecond))
	}
	return fmt.Errorf("%w: the %s waited in line and was not run (%s); try again", ErrBusy, o, what)
}

// runOps runs the operations in line, one at a time, until none is left
// or the daemon stops (those still in line are then answered
// errShuttingDown).
func (a *App) runOps() {
	for {
		a.mu.Lock()
		if len(a.queue) == 0 || a.phase != phaseRunning {
			for _, o := range a.queue {
				o.err = errShuttingDown
				close(o.done)
			}
			a.queue = nil
			a.working = false
			a.mu.Unlock()
			a.poke()
			return
		}
		o := a.queue[0]
		a.queue = a.queue[1:]
		o.started = time.Now()
		a.current = o
		ctx := a.runCtx
		a.mu.Unlock()
		switch o.kind {
		case opReload:
			o.res, o.err = a.reload(ctx)
		case opRestart:
			o.err = a.restart(ctx, o.name, nil, false)
		case opAutoRestart:
			o.err = a.restart(ctx, o.name, o.unit, true)
		case opRevive:
			o.err = a.restart(ctx, o.name, o.unit, false)
		}
		a.mu.Lock()
		a.current = nil
		a.mu.Unlock()
		close(o.done)
		a.poke()
	}
}

// setPaused pauses or resumes the named pipeline: now if it runs, and
// in any case the state it starts in if it is loading, due to restart by
// itself, or being replaced. It reports whether that changed anything.
func (a *App) setPaused(name string, paused bool) (bool, error) {
	a.pauseMu.Lock()
	defer a.pauseMu.Unlock()
	a.mu.Lock()
	u := a.unitByName(name)
	switch {
	case a.phase >= phaseStopping:
		a.mu.Unlock()
		return false, errShuttingDown
	case u == nil:
		a.mu.Unlock()
		return false, fmt.Errorf("%w %q", ErrUnknownPipeline, name)
	case u.state == unitEnded && u.restartAt.IsZero():
		state := "failed"
		if u.err == nil {
			state = "ended"
			if u.p != nil {
				state = string(u.p.Status().State)
			}
		}
		a.mu.Unlock()
		return false, fmt.Errorf("%w: %s is %s", ErrNotRunning, name, state)
	}
	was := u.paused
	u.paused = paused
	var p = u.p
	if u.state != unitRunning {
		p = nil
	}
	a.mu.Unlock()
	switch {
	case p == nil:
		return was != paused, nil
	case paused:
		return p.Pause(), nil
	default:
		return p.Resume(), nil
	}
}
