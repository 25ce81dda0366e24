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
// the offsets are in it either way), so it is started again, built afresh (a new transactional
// client, which fences what is left of the old one), and reads from its
// last committed offsets: a transient fault is retried, not a verdict that
// waits for an operator. The backoff starts at restartMin and doubles to
// restartMax; it starts again at restartMin after a run that committed a
// transaction.
const (
	restartMin = time.Second
	restartMax = 30 * time.Second
)

// autoRestart decides, when u's Run returned err, whether u is started
// again by itself and after how long; ended is whether Run's context was
// cancelled (a stop, a reload, shutting down), then never. Called with
// u.mu held, before u.done is closed, so that allEnded counts u as
// pending.
func (a *App) autoRestart(u *unit, err error, ended bool) (time.Duration, bool) {
	if err == nil || ended || !errors.Is(err, pipeline.ErrTxnWrite) {
		return 0, false
	}
	d := restartMin
	if st := u.p.Status().Transactions; u.backoff > 0 && (st == nil || st.Committed == 0) {
		d = min(2*u.backoff, restartMax)
	}
	u.backoff = d
	u.restartAt = time.Now().Add(d)
	u.restartCause = err.Error()
	a.log.Warn("exactly-once pipeline failed inside a transaction; starting it again from the last committed offsets",
		"pipeline", u.name, "in", d, "auto_restarts", u.autoRestarts, "err", err)
	return d, true
}

// restartLater restarts old after d (and again, with the backoff, while
// building it fails), unless the daemon shuts down or old was replaced
// meanwhile (a reload, a restart by hand).
func (a *App) restartLater(old *unit, d time.Duration) {
	ctx := a.run.ctx
	for {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := a.restart(ctx, old.name, old)
		if err == nil || errors.Is(err, errShuttingDown) || errors.Is(err, errReplaced) {
			return
		}
		old.mu.Lock()
		d = min(2*old.backoff, restartMax)
		old.backoff, old.restartAt = d, time.Now().Add(d)
		old.mu.Unlock()
		a.log.Error("automatic restart failed; trying again", "pipeline", old.name, "in", d, "err", err)
	}
}

var errReplaced = errors.New("pipeline was replaced meanwhile")

// newRestartMetric is streamd_pipeline_auto_restarts_total; it outlives
// the pipelines it counts (each restart is a new pipeline.Pipeline).
func newRestartMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamd_pipeline_auto_restarts_total",
		Help: "Pipelines started again by themselves: an exactly-once pipeline whose write failed inside a transaction (aborted), restarted from its last committed offsets after a backoff; a failed pipeline one of whose plugins was then hot reloaded."},
		[]string{"pipeline"})
	reg.MustRegister(c)
	return c
}
