package pipeline

import (
	"context"
	"sync"
)

// Pauser is implemented by sources that can stop reading from their origin
// without giving up what they read from: a Kafka source stops fetching and
// keeps its group membership and assignment, so pausing causes no
// rebalance. The pipeline calls PauseFetch when it is paused and
// ResumeFetch when it is resumed; records the source buffered meanwhile
// must be returned by a later fetch, none lost.
type Pauser interface {
	PauseFetch()
	ResumeFetch()
}

// control is a pipeline's pause switch.
type control struct {
	mu      sync.Mutex
	paused  bool
	resumed chan struct{} // closed by Resume; nil while not paused
}

// WithPaused starts the pipeline paused (config `paused = true`): it
// connects and becomes ready, but fetches nothing until Resume.
func WithPaused(paused bool) Option { return func(o *options) { o.paused = paused } }

// Pause stops the pipeline fetching: nothing new is read, the records in
// flight are written and acknowledged, and acknowledged positions are still
// committed, so committed offsets stop moving within one commit interval.
// A Kafka source keeps its membership and assignment (no rebalance).
// Pausing a paused pipeline does nothing. It reports whether the pipeline
// was running unpaused before.
func (p *Pipeline) Pause() bool {
	p.ctl.mu.Lock()
	was := p.ctl.paused
	if !was {
		p.ctl.paused, p.ctl.resumed = true, make(chan struct{})
	}
	p.ctl.mu.Unlock()
	if !was {
		if ps, ok := p.src.(Pauser); ok {
			ps.PauseFetch()
		}
		p.o.logger.Info("pipeline paused", "pipeline", p.name, "in_flight", p.inflight.Load())
	}
	return !was
}

// Resume lets a paused pipeline fetch again, from where it stopped. It
// reports whether the pipeline was paused.
func (p *Pipeline) Resume() bool {
	p.ctl.mu.Lock()
	was := p.ctl.paused
	if was {
		p.ctl.paused = false
		close(p.ctl.resumed)
		p.ctl.resumed = nil
	}
	p.ctl.mu.Unlock()
	if was {
		if ps, ok := p.src.(Pauser); ok {
			ps.ResumeFetch()
		}
		p.o.logger.Info("pipeline resumed", "pipeline", p.name)
	}
	return was
}

// Paused reports whether the pipeline is paused.
func (p *Pipeline) Paused() bool {
	p.ctl.mu.Lock()
	defer p.ctl.mu.Unlock()
	return p.ctl.paused
}

// waitResumed blocks while the pipeline is paused; false when ctx is done
// or the pipeline failed meanwhile.
func (p *Pipeline) waitResumed(ctx context.Context) bool {
	for {
		p.ctl.mu.Lock()
		ch := p.ctl.resumed
		p.ctl.mu.Unlock()
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-p.stop:
			return false
		}
	}
}

// txnPause runs in the fetch loop of a paused pipeline that runs in
// transactions: it ends the open transaction, committing it, once every
// record fetched in it is finished. Left open while paused, what it wrote
// would stay uncommitted, and the broker aborts a transaction at its
// timeout. It returns false when the loop must stop. The end runs on
// work, as txnTurn's.
func (p *Pipeline) txnPause(ctx, work context.Context) bool {
	x := p.tx
	if !x.open || x.records == 0 {
		return true
	}
	return p.waitFinished(ctx) && p.endTxn(work, true)
}
