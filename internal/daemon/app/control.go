package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
)

// Errors of the pipeline controls.
var (
	// ErrUnknownPipeline: no pipeline of that name runs.
	ErrUnknownPipeline = errors.New("no such pipeline")
	// ErrNotRunning: the pipeline has ended (done, stopped or failed);
	// restart it, or reload a changed config.
	ErrNotRunning = errors.New("pipeline is not running")
)

// StateLoading is the state of a pipeline whose plugins are loading, in
// its Status: it has no pipeline.Pipeline yet.
const StateLoading pipeline.State = "loading"

// Pause pauses the named pipeline (pipeline.Pipeline.Pause): it fetches
// nothing more, finishes and commits what is in flight, and keeps its
// consumer group membership and assignment. A pipeline that is loading,
// being replaced or due to restart by itself starts paused. Pause reports
// whether the pipeline was unpaused.
func (a *App) Pause(name string) (bool, error) { return a.setPaused(name, true) }

// Resume resumes the named pipeline; it reports whether it was paused.
func (a *App) Resume(name string) (bool, error) { return a.setPaused(name, false) }

// Restart builds the named pipeline again from the running config (its
// plugins loaded again), drains the running one as on SIGTERM, and starts
// the new one, paused if the old one was; a failed or ended pipeline is
// started again. If the build fails, the running pipeline is left alone
// and the error returned. It runs in line with reloads (lifecycle.go):
// ctx bounds the wait for those before it (ErrBusy).
func (a *App) Restart(ctx context.Context, name string) error {
	a.mu.Lock()
	known := a.unitByName(name) != nil
	a.mu.Unlock()
	if !known {
		return fmt.Errorf("%w %q", ErrUnknownPipeline, name)
	}
	o, err := a.submit(opRestart, name, nil)
	if err != nil {
		return err
	}
	if err := a.await(ctx, o); err != nil {
		return err
	}
	return o.err
}

// restart is the restart operation; with auto set, the automatic restart
// of that unit, which does nothing if it is no longer the named
// pipeline's unit or no longer ended, and, with retry, is scheduled again
// with a longer backoff if the build fails.
func (a *App) restart(ctx context.Context, name string, auto *unit, retry bool) error {
	a.mu.Lock()
	old, cfg, cl := a.unitByName(name), a.cfg, a.cl
	replaced := auto != nil && (old != auto || old.state != unitEnded)
	a.mu.Unlock()
	switch {
	case replaced:
		return nil
	case old == nil:
		return fmt.Errorf("%w %q", ErrUnknownPipeline, name)
	case old.pc.Sink.Type == "journal":
		return fmt.Errorf("pipeline %s: a journal pipeline restarts only with the daemon", name)
	}
	idx := slices.IndexFunc(cfg.Pipelines, func(p config.Pipeline) bool { return p.Name == name })
	if idx < 0 {
		return fmt.Errorf("%w %q in the running config", ErrUnknownPipeline, name)
	}
	nu := newUnit(cfg, idx)
	if err := a.build(ctx, nu, cl); err != nil {
		if retry {
			a.retryRestart(auto, err)
		}
		return err
	}
	start := time.Now()
	a.stop(old)
	a.pauseMu.Lock()
	a.mu.Lock()
	carry(old, nu)
	if auto != nil {
		nu.autoRestarts++
	}
	a.units[slices.Index(a.units, old)] = nu
	a.mu.Unlock()
	a.pauseMu.Unlock()
	if auto != nil {
		a.autoRestarts.WithLabelValues(name).Inc()
	}
	a.start(nu)
	a.log.Info("pipeline restarted", "pipeline", name, "drained_in", time.Since(start).Round(time.Millisecond), "automatic", auto != nil)
	return nil
}

// carry gives nu, which replaces old, old's counts and pause; a.mu must be
// held.
func carry(old, nu *unit) {
	nu.restarts = old.restarts + 1
	nu.autoRestarts, nu.backoff, nu.restartCause = old.autoRestarts, old.backoff, old.restartCause
	nu.paused = old.paused
}

// PipelineStatus is one pipeline in Status.
type PipelineStatus struct {
	pipeline.Status
	// Restarts counts restarts and reload replacements since the daemon
	// started.
	Restarts int `json:"restarts"`
	// AutoRestarts counts those that were automatic: an exactly-once
	// pipeline started again after a write failed inside a transaction
	// (docs/delivery.md), a failed pipeline one of whose plugins was hot
	// reloaded (docs/operations.md); LastRestartCause is the last one's error, and
	// RestartAt is set while the next one waits for its backoff.
	AutoRestarts     int       `json:"auto_restarts"`
	LastRestartCause string    `json:"last_restart_cause,omitempty"`
	RestartAt        time.Time `json:"restart_at,omitzero"`
	// Since is when the pipeline (this build of it) started running, or
	// started loading.
	Since time.Time `json:"since,omitzero"`
	// Group is the consumer group membership of a Kafka source: the
	// assigned partitions and the generation.
	Group *kafka.GroupStatus `json:"group,omitempty"`
}

// Status is the daemon's state for /v1/status and `streamd ctl status`.
type Status struct {
	Config string `json:"config"`
	// Ready is what /readyz says: every pipeline that has not ended is
	// ready.
	Ready     bool             `json:"ready"`
	Pipelines []PipelineStatus `json:"pipelines"`
	// LastReload is the last reload's result, if one was tried; when it
	// was refused, ReloadError repeats its error (the running config is
	// the one before it).
	LastReload  *ReloadResult `json:"last_reload,omitempty"`
	ReloadError string        `json:"reload_error,omitempty"`
}

// grouper is a source that knows its consumer group membership.
type grouper interface{ Group() kafka.GroupStatus }

// Status returns the daemon's state.
func (a *App) Status() Status {
	type row struct {
		ps       PipelineStatus
		p        *pipeline.Pipeline
		src      pipeline.Source
		state    unitState
		err      error
		name     string
		delivery string
	}
	a.mu.Lock()
	rows := make([]row, len(a.units))
	for i, u := range a.units {
		r := row{p: u.p, state: u.state, err: u.err, name: u.name, delivery: u.pc.Delivery}
		if u.built {
			r.src = u.src
		}
		r.ps.Restarts, r.ps.Since = u.restarts, u.since
		r.ps.AutoRestarts, r.ps.LastRestartCause, r.ps.RestartAt = u.autoRestarts, u.restartCause, u.restartAt
		r.ps.Paused = u.paused
		rows[i] = r
	}
	file := a.cfg.File
	a.mu.Unlock()
	st := Status{Config: file, Ready: true, Pipelines: make([]PipelineStatus, 0, len(rows)), LastReload: a.LastReload()}
	if r := st.LastReload; r != nil && !r.OK {
		st.ReloadError = r.Error
	}
	for _, r := range rows {
		ps := r.ps
		if r.p != nil {
			ps.Status = r.p.Status()
		} else {
			ps.Status = unbuiltStatus(r.name, r.delivery, r.state, r.err, ps.Since, ps.Paused)
		}
		if g, ok := r.src.(grouper); ok {
			gs := g.Group()
			ps.Group = &gs
		}
		if ps.State != pipeline.StateDone && ps.State != pipeline.StateStopped && !ps.Ready {
			st.Ready = false
		}
		st.Pipelines = append(st.Pipelines, ps)
	}
	return st
}

// unbuiltStatus is the status of a pipeline that has no pipeline.Pipeline:
// its plugins load, they failed to (err), or the daemon stopped meanwhile.
func unbuiltStatus(name, delivery string, state unitState, err error, since time.Time, paused bool) pipeline.Status {
	s := pipeline.Status{Name: name, State: StateLoading, Paused: paused, Delivery: delivery, Rejected: map[string]int64{}}
	switch {
	case err != nil:
		s.State, s.Error = pipeline.StateFailed, err.Error()
		s.Reason = "failed to load: " + s.Error
	case state == unitLoading:
		s.Reason = "loading its plugins"
		if !since.IsZero() {
			s.Reason += " (for " + time.Since(since).Round(time.Millisecond).String() + ")"
		}
	default:
		s.State = pipeline.StateStopped
	}
	return s
}

// Statuses returns the status of every pipeline of the running config, in
// its order, loading ones included: what /readyz, /pipelines and systemd's
// notifications report.
func (a *App) Statuses() []pipeline.Status {
	ps := a.Status().Pipelines
	out := make([]pipeline.Status, len(ps))
	for i := range ps {
		out[i] = ps[i].Status
	}
	return out
}
