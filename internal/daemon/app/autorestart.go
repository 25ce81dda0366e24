package app

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamd/streamd/pipeline"
)

// Automatic restarts: an exactly-once pipeline that failed because a
// write inside a transaction, or the transaction's commit, failed
// transiently (pipeline.ErrTxnWrite: a sink topic deleted under it, a
// fenced producer, a transaction the broker timed out) had that
// transaction aborted (or committed, for a commit whose answer was lost:
// the offsets are in it either way), so it is started again, built afresh
// from the running config (a new transactional client, which fences what
// is left of the old one), and reads from its last committed offsets: a
// transient fault is retried, not a verdict that waits for an operator.
// The backoff starts at restartMin and doubles to restartMax; it starts
// again at restartMin after a run that committed a transaction. The
// restart itself is an operation in line like a reload (lifecycle.go).
const (
	restartMin = time.Second
	restartMax = 30 * time.Second
)

// autoRestart decides, when u's pipeline returned err by itself (not
// stopped by an operation or the daemon's end), whether u is started
// again after a backoff, and if so schedules it and reports true. a.mu
// must be held.
func (a *App) autoRestart(u *unit, err error) bool {
	if err == nil || !errors.Is(err, pipeline.ErrTxnWrite) || u.p == nil {
		return false
	}
	d := restartMin
	if st := u.p.Status().Transactions; u.backoff > 0 && (st == nil || st.Committed == 0) {
		d = min(2*u.backoff, restartMax)
	}
	u.restartCause = err.Error()
	a.scheduleRestart(u, d)
	a.log.Warn("exactly-once pipeline failed inside a transaction; starting it again from the last committed offsets",
		"pipeline", u.name, "in", d, "auto_restarts", u.autoRestarts, "err", err)
	return true
}

// scheduleRestart puts an automatic restart of u in line after d. a.mu
// must be held.
func (a *App) scheduleRestart(u *unit, d time.Duration) {
	u.backoff, u.restartAt = d, time.Now().Add(d)
	if u.timer != nil {
		u.timer.Stop()
	}
	u.timer = time.AfterFunc(d, func() {
		if _, err := a.submit(opAutoRestart, u.name, u); err != nil {
			a.log.Info("automatic restart not done", "pipeline", u.name, "err", err)
		}
	})
}

// retryRestart schedules the automatic restart of u again, with the
// backoff doubled, after building its replacement failed with err; unless
// u was replaced meanwhile.
func (a *App) retryRestart(u *unit, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.unitByName(u.name) != u || u.state != unitEnded || a.phase != phaseRunning {
		return
	}
	d := min(2*u.backoff, restartMax)
	a.scheduleRestart(u, d)
	a.log.Error("automatic restart failed; trying again", "pipeline", u.name, "in", d, "err", err)
}

// newRestartMetric is streamd_pipeline_auto_restarts_total; it outlives
// the pipelines it counts (each restart is a new pipeline.Pipeline).
func newRestartMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamd_pipeline_auto_restarts_total",
		Help: "Pipelines started again by themselves: an exactly-once pipeline whose write failed inside a transaction (aborted), restarted from its last committed offsets after a backoff; a failed pipeline one of whose plugins was then hot reloaded."},
		[]string{"pipeline"})
	reg.MustRegister(c)
	return c
}
