package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/x/wait"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
)

// unit is one pipeline of the running config with everything built for
// it: its source, stages and sink, the plugins loaded and the clients
// opened for it, and its goroutine. A reload replaces units whose
// effective config changed, and leaves the others alone. Its states and
// their rules are in lifecycle.go.
type unit struct {
	name string
	// pc is the pipeline's table as loaded; eff is what decides whether a
	// reload changes it (effective); cfg and idx are the config it is
	// built from and its index there.
	pc  config.Pipeline
	eff effective
	cfg *config.Config
	idx int

	// What build makes. Written by the goroutine that builds the unit,
	// read once the unit has left unitLoading (a.mu orders the two).
	built   bool
	src     pipeline.Source
	sink    plugins.Sink
	opts    []pipeline.Option
	parts   *pipeParts // for the console (console.go)
	loaded  []plugins.Plugin
	closers []func(context.Context) error
	ran     bool // its pipeline's Run was called (it closes the source)

	// The lifecycle (lifecycle.go), under a.mu.
	p      *pipeline.Pipeline // made by make
	state  unitState
	paused bool               // wanted paused (by hand, or by the file)
	cancel context.CancelFunc // ends its build or its run, once launched
	done   chan struct{}      // closed when it ended, once launched
	err    error              // why it ended, when it failed
	since  time.Time          // when it started loading, or running
	// restarts counts restarts and reload replacements since the daemon
	// started; the automatic ones (autorestart.go) are counted again in
	// autoRestarts, with the last backoff and cause, and when the pending
	// one is due (zero: none pending) and its timer.
	restarts     int
	autoRestarts int
	backoff      time.Duration
	restartCause string
	restartAt    time.Time
	timer        *time.Timer
}

// newUnit is pipeline i of cfg, not built yet.
func newUnit(cfg *config.Config, i int) *unit {
	pc := cfg.Pipelines[i]
	return &unit{name: pc.Name, pc: pc, eff: effectiveOf(cfg, i), cfg: cfg, idx: i, paused: pc.Paused}
}

// build builds u's parts with a builder of its config (see derive) that
// shares cl's clients; on error everything it opened is released.
func (a *App) build(ctx context.Context, u *unit, cl *clientCache) error {
	b := a.derive(u.cfg, cl)
	b.cur = u
	err := b.buildPipeline(ctx, u.idx)
	if err != nil {
		var cerr error
		if u.src != nil {
			cerr = u.src.Close(ctx)
		}
		if cerr = errors.Join(cerr, u.release(ctx)); cerr != nil {
			a.log.Warn("close", "pipeline", u.name, "err", cerr)
		}
		return err
	}
	a.mu.Lock()
	u.built = true
	a.mu.Unlock()
	return nil
}

// buildAll builds units at once, each as build does; it returns their
// errors, by unit.
func (a *App) buildAll(ctx context.Context, units []*unit, cl *clientCache) []error {
	errs := make([]error, len(units))
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.build(ctx, u, cl)
		}()
	}
	wg.Wait()
	return errs
}

// make creates u's pipeline, observed (counted) by a's metrics, if it has
// none yet.
func (a *App) make(u *unit) {
	a.mu.Lock()
	made := u.p != nil
	a.mu.Unlock()
	if made {
		return
	}
	opts := append(u.opts[:len(u.opts):len(u.opts)], pipeline.WithObserver(a.metrics))
	p := pipeline.New(u.name, u.src, u.sink, opts...)
	if u.parts != nil {
		u.parts.p = p
	}
	a.mu.Lock()
	u.p = p
	a.mu.Unlock()
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
func (u *unit) closeContext(p *pipeline.Pipeline) (context.Context, context.CancelFunc) {
	if p != nil {
		if d, ok := p.ShutdownDeadline(); ok {
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

// unitByName returns the unit of the pipeline named name, or nil; a.mu
// must be held.
func (a *App) unitByName(name string) *unit {
	for _, u := range a.units {
		if u.name == name {
			return u
		}
	}
	return nil
}
