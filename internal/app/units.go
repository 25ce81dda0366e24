package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/streamd/streamd/internal/config"
	"github.com/streamd/streamd/internal/wait"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/metrics"
	"github.com/streamd/streamd/plugins"
)

// unit is one pipeline of the running config with everything built for
// it: its source, stages and sink, the plugins loaded and the clients
// opened for it, and its goroutine. A reload replaces units whose
// effective config changed, and leaves the others alone.
type unit struct {
	name string
	// pc is the pipeline's table as loaded; eff is what decides whether a
	// reload changes it (effective).
	pc  config.Pipeline
	eff effective

	src     pipeline.Source
	sink    plugins.Sink
	opts    []pipeline.Option
	p       *pipeline.Pipeline // made by make
	parts   *pipeParts         // for the console (console.go)
	loaded  []plugins.Plugin
	closers []func(context.Context) error

	mu       sync.Mutex
	cancel   context.CancelFunc // set while running
	done     chan struct{}      // closed when Run returned
	err      error
	started  time.Time
	restarts int
	// Automatic restarts (autorestart.go), carried to the unit that
	// replaces this one: how many, the last backoff and cause, and when
	// the pending one is due (zero: none pending).
	autoRestarts int
	backoff      time.Duration
	restartCause string
	restartAt    time.Time
}

// buildUnit builds pipeline i of a.cfg; on error everything it opened is
// released.
func (a *App) buildUnit(ctx context.Context, i int) (*unit, error) {
	pc := a.cfg.Pipelines[i]
	u := &unit{name: pc.Name, pc: pc, eff: effectiveOf(a.cfg, i)}
	a.cur = u
	err := a.buildPipeline(ctx, i)
	a.cur = nil
	if err != nil {
		var cerr error
		if u.src != nil {
			cerr = u.src.Close(ctx)
		}
		if cerr = errors.Join(cerr, u.release(ctx)); cerr != nil {
			a.log.Warn("close", "pipeline", u.name, "err", cerr)
		}
		return nil, err
	}
	return u, nil
}

// make creates the unit's pipeline, observed (counted) by m.
func (u *unit) make(m *metrics.Metrics) {
	if u.p == nil {
		u.p = pipeline.New(u.name, u.src, u.sink, append(u.opts[:len(u.opts):len(u.opts)], pipeline.WithObserver(m))...)
		if u.parts != nil {
			u.parts.p = u.p
		}
	}
}

// release closes the unit's clients and plugins (the pipeline closed its
// source when Run returned), all at once, by ctx's deadline (see
// closeContext), and returns what they returned.
func (u *unit) release(ctx context.Context) error {
	cs := withPlugins(u.closers, u.loaded)
	u.closers, u.loaded = nil, nil
	return closeAll(ctx, cs)
}

// closeContext is the context the unit's parts are closed with: until its
// pipeline's shutdown deadline (shutdown_timeout after SIGTERM, a reload
// or a restart: the sinks' flush comes out of the same budget as the
// drain, the commit and the group leave), or 10 s for a pipeline that
// never ran.
func (u *unit) closeContext() (context.Context, context.CancelFunc) {
	if u.p != nil {
		if d, ok := u.p.ShutdownDeadline(); ok {
			return context.WithDeadline(context.Background(), d)
		}
	}
	return context.WithTimeout(context.Background(), closeTimeout)
}

// closeTimeout bounds closing what has no shutdown deadline of its own.
const closeTimeout = 10 * time.Second

// withPlugins returns cs and a closer for each plugin of loaded, whose
// error names the plugin.
func withPlugins(cs []func(context.Context) error, loaded []plugins.Plugin) []func(context.Context) error {
	for _, p := range loaded {
		cs = append(cs, func(ctx context.Context) error {
			if err := p.Close(ctx); err != nil {
				return fmt.Errorf("plugin %s: %w", p.Manifest().Name, err)
			}
			return nil
		})
	}
	return cs
}

// closeAll runs every closer at once with ctx and waits until they all
// returned, or ctx is done: a closer still running then (a producer
// flushing to a broker that does not answer) is left to finish in the
// background, so that shutting down ends by the deadline. It returns the
// closers' errors, joined.
func closeAll(ctx context.Context, cs []func(context.Context) error) error {
	if len(cs) == 0 {
		return nil
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if !wait.Closed(ctx, done, wait.CloseGrace) {
		mu.Lock()
		defer mu.Unlock()
		return errors.Join(append(errs, fmt.Errorf("closing did not finish by the shutdown deadline; left to finish in the background: %w", ctx.Err()))...)
	}
	return errors.Join(errs...)
}

// running reports whether the unit's pipeline is running (Run has not
// returned).
func (u *unit) running() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done == nil {
		return false
	}
	select {
	case <-u.done:
		return false
	default:
		return true
	}
}

// runState is what Run sets up for starting and stopping units.
type runState struct {
	ctx      context.Context // Run's context: units run under it
	ended    chan struct{}   // signalled when a unit's Run returns
	started  bool
	stopping bool // Run is draining: no reload or restart may start units
}

var errShuttingDown = errors.New("streamd is shutting down")

// stopping reports whether Run is shutting down.
func (a *App) stopping() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.run.stopping
}

// start runs the unit's pipeline in the background under a.run.ctx.
func (a *App) start(u *unit) {
	u.make(a.metrics)
	ctx, cancel := context.WithCancel(a.run.ctx)
	done := make(chan struct{})
	u.mu.Lock()
	u.cancel, u.done, u.err, u.started = cancel, done, nil, time.Now()
	u.mu.Unlock()
	go func() {
		err := u.p.Run(ctx)
		if err != nil {
			err = fmt.Errorf("pipeline %s: %w", u.name, err)
		}
		u.mu.Lock()
		u.err = err
		again, retry := a.autoRestart(u, err, ctx.Err() != nil)
		u.mu.Unlock()
		if retry {
			go a.restartLater(u, again)
		} else if err != nil && ctx.Err() == nil {
			go a.reviveOnReload(u, err, reloadWatches(u.loaded)) // revive.go
		}
		// Done before Run hears of it: Run asks every unit whether it
		// is still running when it hears one ended.
		close(done)
		select {
		case a.run.ended <- struct{}{}:
		default:
		}
	}()
}

// stop drains the unit's pipeline as on SIGTERM (in-flight records are
// written and committed within its shutdown timeout), waits for it, and
// releases everything built for it.
func (a *App) stop(u *unit) {
	u.mu.Lock()
	cancel, done := u.cancel, u.done
	u.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	ctx, cancelRel := u.closeContext()
	defer cancelRel()
	var err error
	if cancel == nil && u.src != nil {
		err = u.src.Close(ctx) // never run: the pipeline did not close it
	}
	if err = errors.Join(err, u.release(ctx)); err != nil {
		a.log.Warn("close", "pipeline", u.name, "err", err)
	}
	if u.p != nil {
		a.metrics.Remove(u.p)
	}
}

// runUnits starts every unit and waits until ctx is done, or every unit
// has ended (a daemon that also serves the fluid bridge or the journal
// API, or has no pipelines, keeps running until ctx is done). It returns
// the errors of the pipelines that failed.
func (a *App) runUnits(ctx context.Context) error {
	a.mu.Lock()
	a.run = runState{ctx: ctx, ended: make(chan struct{}, 1), started: true}
	units := append([]*unit(nil), a.units...)
	a.mu.Unlock()
	for _, u := range units {
		a.start(u)
	}
	serves := a.cfg.Fluid != nil || (a.cfg.Journal != nil && a.cfg.Admin.Listen != "")
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-a.run.ended:
			// Every pipeline ended: the daemon exits, unless it serves
			// the fluid bridge or the journal API and none failed.
			if ended, failed := a.allEnded(); ended && (failed || !serves) {
				break wait
			}
		}
	}
	// Every unit runs under ctx: wait for them to drain. A reload or a
	// restart in progress finishes first (it holds ctl); none starts after.
	a.ctl.Lock()
	a.mu.Lock()
	a.run.stopping = true
	units = append(units[:0], a.units...)
	a.mu.Unlock()
	var errs []error
	for _, u := range units {
		u.mu.Lock()
		done := u.done
		u.mu.Unlock()
		if done != nil {
			<-done
		}
		u.mu.Lock()
		if u.err != nil {
			errs = append(errs, u.err)
		}
		u.mu.Unlock()
	}
	a.ctl.Unlock()
	return errors.Join(errs...)
}

// allEnded reports whether there are units and none is running, and
// whether one of them failed.
func (a *App) allEnded() (ended, failed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.units) == 0 {
		return false, false
	}
	for _, u := range a.units {
		if u.running() {
			return false, false
		}
		u.mu.Lock()
		pending := !u.restartAt.IsZero()
		failed = failed || u.err != nil
		u.mu.Unlock()
		if pending {
			return false, false // starts again by itself
		}
	}
	return true, failed
}

// unitByName returns the unit of the pipeline named name, or nil.
func (a *App) unitByName(name string) *unit {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range a.units {
		if u.name == name {
			return u
		}
	}
	return nil
}
