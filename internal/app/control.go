package app

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// Pause pauses the named pipeline (pipeline.Pipeline.Pause): it fetches
// nothing more, finishes and commits what is in flight, and keeps its
// consumer group membership and assignment. It reports whether the
// pipeline was running unpaused.
func (a *App) Pause(name string) (bool, error) {
	return a.onRunning(name, (*pipeline.Pipeline).Pause)
}

// Resume resumes the named pipeline; it reports whether it was paused.
func (a *App) Resume(name string) (bool, error) {
	return a.onRunning(name, (*pipeline.Pipeline).Resume)
}

// onRunning applies op to the named running pipeline, under the controls'
// lock.
func (a *App) onRunning(name string, op func(*pipeline.Pipeline) bool) (bool, error) {
	a.ctl.Lock()
	defer a.ctl.Unlock()
	u, err := a.runningUnit(name)
	if err != nil {
		return false, err
	}
	return op(u.p), nil
}

func (a *App) runningUnit(name string) (*unit, error) {
	u := a.unitByName(name)
	switch {
	case u == nil:
		return nil, fmt.Errorf("%w %q", ErrUnknownPipeline, name)
	case !u.running():
		return nil, fmt.Errorf("%w: %s is %s", ErrNotRunning, name, u.p.Status().State)
	}
	return u, nil
}

// Restart builds the named pipeline again from the running config (its
// plugins loaded again), drains the running one as on SIGTERM, and starts
// the new one; a failed or ended pipeline is started again. If the build
// fails, the running pipeline is left alone and the error returned. The
// new pipeline starts paused only if the config says `paused = true`.
func (a *App) Restart(ctx context.Context, name string) error {
	return a.restart(ctx, name, nil)
}

// restart is Restart; with auto set, only if auto is still the named
// pipeline's unit (errReplaced otherwise), and counted as automatic
// (autorestart.go).
func (a *App) restart(ctx context.Context, name string, auto *unit) error {
	a.ctl.Lock()
	defer a.ctl.Unlock()
	if a.stopping() {
		return errShuttingDown
	}
	old := a.unitByName(name)
	if old == nil {
		return fmt.Errorf("%w %q", ErrUnknownPipeline, name)
	}
	if auto != nil && old != auto {
		return errReplaced
	}
	if old.pc.Sink.Type == "journal" {
		return fmt.Errorf("pipeline %s: a journal pipeline restarts only with the daemon", name)
	}
	cfg := a.config()
	idx := -1
	for i := range cfg.Pipelines {
		if cfg.Pipelines[i].Name == name {
			idx = i
		}
	}
	if idx < 0 {
		return fmt.Errorf("%w %q in the running config", ErrUnknownPipeline, name)
	}
	nu, err := a.derive(cfg, false, false).buildUnit(ctx, idx)
	if err != nil {
		return err
	}
	start := time.Now()
	a.stop(old)
	nu.restarts = old.restarts + 1
	old.mu.Lock()
	nu.autoRestarts, nu.backoff, nu.restartCause = old.autoRestarts, old.backoff, old.restartCause
	old.mu.Unlock()
	if auto != nil {
		nu.autoRestarts++
		a.autoRestarts.WithLabelValues(name).Inc()
	}
	nu.make(a.metrics)
	a.mu.Lock()
	for i, u := range a.units {
		if u == old {
			a.units[i] = nu
		}
	}
	running := a.run.started
	a.mu.Unlock()
	if running {
		a.start(nu)
	}
	a.log.Info("pipeline restarted", "pipeline", name, "drained_in", time.Since(start).Round(time.Millisecond), "automatic", auto != nil)
	return nil
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
	// Since is when the pipeline (this build of it) started.
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
	a.mu.Lock()
	units := append([]*unit(nil), a.units...)
	file := a.cfg.File
	a.mu.Unlock()
	st := Status{Config: file, Ready: true, Pipelines: []PipelineStatus{}, LastReload: a.LastReload()}
	if r := st.LastReload; r != nil && !r.OK {
		st.ReloadError = r.Error
	}
	for _, u := range units {
		ps := PipelineStatus{Status: u.p.Status(), Restarts: u.restarts}
		u.mu.Lock()
		ps.Since = u.started
		ps.AutoRestarts, ps.LastRestartCause, ps.RestartAt = u.autoRestarts, u.restartCause, u.restartAt
		u.mu.Unlock()
		if g, ok := u.src.(grouper); ok {
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
