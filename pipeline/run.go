package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/streamd/streamd/internal/x/wait"
)

// waitReady checks every part that can be checked, retrying until ctx ends.
func (p *Pipeline) waitReady(ctx context.Context) error {
	parts := []any{p.src, p.sink}
	if p.o.dlq != nil {
		parts = append(parts, p.o.dlq)
	}
	for _, part := range parts {
		r, ok := part.(Readier)
		if !ok {
			continue
		}
		backoff := p.o.retryInitial
		for {
			err := r.Ready(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.o.logger.Warn("not ready yet", "pipeline", p.name, "err", err)
			p.noteTrouble(err)
			if wait.Sleep(ctx, backoff) != nil {
				return ctx.Err()
			}
			backoff = min(backoff*2, p.o.retryMax)
		}
	}
	p.mu.Lock()
	p.ready = true
	p.mu.Unlock()
	return nil
}

// Run runs the pipeline until its source ends, ctx is done or it fails.
// When ctx is done it stops fetching, drains in-flight work, commits and
// closes the source, all within the shutdown timeout (one deadline; see
// [WithShutdownTimeout]), and returns nil. It returns the error that failed
// the pipeline, if any. Run closes the source.
func (p *Pipeline) Run(ctx context.Context) error {
	log := p.o.logger.With("pipeline", p.name)
	if p.o.policy == PolicyDLQ && p.dlq == nil {
		err := errors.New("error policy dlq without a dead-letter sink")
		p.fail(err)
		p.closeSource(ctx, log, p.startShutdown())
		return err
	}
	if err := p.waitReady(ctx); err != nil {
		p.setState(StateStopped)
		p.closeSource(ctx, log, p.startShutdown())
		return nil
	}
	p.progress()
	p.setState(StateRunning)
	log.Info("pipeline running", "stages", len(p.o.stages), "workers", p.o.workers)
	watchDone := make(chan struct{})
	defer close(watchDone)
	go p.watch(watchDone)

	// work is cancelled only when the drain time runs out: in-flight
	// batches finish writing after ctx is done.
	work, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()

	shards := make([]chan []Msg, p.o.workers)
	var wg sync.WaitGroup
	for i := range shards {
		shards[i] = make(chan []Msg, 4)
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.worker(work, shards[i])
		}()
	}
	// Periodic commits run on their own context, cancelled when Run
	// stops them: a commit blocked on an unreachable broker must not hold
	// up shutdown (the final commit below has the shutdown's deadline).
	commitCtx, stopCommits := context.WithCancel(work)
	commitDone := make(chan struct{})
	go func() {
		defer close(commitDone)
		if p.o.commitInterval <= 0 || p.tx != nil {
			<-commitCtx.Done() // workers commit after every batch, or transactions do
			return
		}
		t := time.NewTicker(p.o.commitInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if err := p.src.Commit(commitCtx); err != nil && commitCtx.Err() == nil {
					log.Warn("commit failed", "err", err)
					p.noteTrouble(fmt.Errorf("commit: %w", err))
				}
			case <-commitCtx.Done():
				return
			}
		}
	}()

	// fetch is cancelled when ctx is done or the pipeline fails, so that a
	// fetch blocked on a quiet source (a Kafka poll) returns at once.
	fetch, stopFetch := wait.WithStop(ctx, p.stop)
	defer stopFetch()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	// The shutdown starts when ctx is done or the pipeline fails, wherever
	// Run is blocked then (a fetch, handing records to a full worker, a
	// stuck write), and has one deadline, the shutdown timeout later:
	// draining gets all of it but the close reserve, after which the work
	// context is cancelled and in-flight batches are abandoned, not
	// committed; the final commit and closing the source get what is left.
	go func() {
		select {
		case <-ctx.Done():
		case <-p.stop:
		case <-drained:
			return
		}
		p.startShutdown()
		t := time.NewTimer(drainTime(p.o.shutdownTimeout))
		defer t.Stop()
		select {
		case <-t.C:
			log.Warn("shutdown timeout: abandoning in-flight batches (they are not committed)", "in_flight", p.inflight.Load(), "shutdown_timeout", p.o.shutdownTimeout)
			abort()
		case <-drained:
		}
	}()
	eof := p.fetchLoop(fetch, work, shards)
	for _, s := range shards {
		close(s)
	}
	p.setState(StateDraining)
	select {
	case <-drained: // a finite source: everything written, however long it took
	case <-work.Done():
		// Aborted: workers return as soon as their stages and sink see
		// the cancelled context. One that ignores it is left behind
		// rather than hold the commit past the deadline; what it
		// acknowledges later is not committed.
		grace := closeReserve(p.o.shutdownTimeout) / 4
		select {
		case <-drained:
		case <-time.After(grace):
			log.Error("workers did not stop after the shutdown timeout; leaving them", "grace", grace)
		}
	}
	stopCommits()
	<-commitDone
	// A source that ended (or nothing at all stopped it) has no deadline
	// yet: the final commit and the close get the close budget of a
	// shutdown that starts now.
	end, ok := p.ShutdownDeadline()
	if !ok {
		end = time.Now().Add(max(shutdownBudget(p.o.shutdownTimeout), finalCommitMin))
		p.shutdownAt.Store(end.UnixNano())
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	defer cancel()
	if p.tx != nil {
		// The open transaction commits what a graceful drain finished;
		// after a failure (policy stop included) or abandoned work it
		// aborts, and a restart reads it again.
		commit := p.failed() == nil && work.Err() == nil && p.inflight.Load() == 0
		p.endTxn(cctx, commit)
	} else if err := p.src.Commit(cctx); err != nil {
		log.Error("final commit failed", "err", err)
		if p.failed() == nil {
			p.fail(fmt.Errorf("final commit: %w", err))
		}
	}
	p.closeSource(ctx, log, end)
	if err := p.failed(); err != nil {
		log.Error("pipeline failed", "err", err)
		return err
	}
	if eof && ctx.Err() == nil {
		p.setState(StateDone)
	} else {
		p.setState(StateStopped)
	}
	log.Info("pipeline stopped", "state", p.Status().State)
	return nil
}

// closeSource closes the source by the deadline (a Kafka source leaves
// its consumer group then) and logs what it returns; a source that does
// not return by then is left closing in the background.
func (p *Pipeline) closeSource(ctx context.Context, log interface{ Warn(string, ...any) }, deadline time.Time) {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.src.Close(ctx); err != nil {
			log.Warn("closing the source", "err", err)
		}
	}()
	if !wait.Closed(ctx, done, wait.CloseGrace) {
		log.Warn("the source did not close within the shutdown timeout; leaving it", "grace", wait.CloseGrace)
	}
}

// The parts of the shutdown's one deadline. A shutdown of timeout T ends
// T after it starts (shutdownBudget, at least minCloseReserve): draining
// in-flight work gets T less the close reserve (drainTime), and the final
// commit, closing the source (a Kafka source's group leave) and, in
// streamd, flushing and closing the sinks share the reserve: a fifth of T,
// from 500 ms to 2 s. A source or worker that ignores its context is
// waited for wait.CloseGrace more, then left behind.
const (
	minCloseReserve = 500 * time.Millisecond
	maxCloseReserve = 2 * time.Second
	// finalCommitMin is what the final commit and the close get when the
	// source ended by itself (no shutdown started): at least 10 s.
	finalCommitMin = 10 * time.Second
)

// startShutdown sets the shutdown's deadline, the shutdown timeout from
// now, and returns it.
func (p *Pipeline) startShutdown() time.Time {
	end := time.Now().Add(shutdownBudget(p.o.shutdownTimeout))
	p.shutdownAt.Store(end.UnixNano())
	return end
}

func closeReserve(timeout time.Duration) time.Duration {
	return min(max(timeout/5, minCloseReserve), maxCloseReserve)
}

func drainTime(timeout time.Duration) time.Duration {
	return max(timeout-closeReserve(timeout), 0)
}

func shutdownBudget(timeout time.Duration) time.Duration {
	return max(timeout, closeReserve(timeout))
}

// ShutdownDeadline returns when the pipeline's shutdown must be over (its
// start plus the shutdown timeout), once it started; ok is false before.
// Whoever closes the pipeline's sinks gives them what is left of it.
func (p *Pipeline) ShutdownDeadline() (time.Time, bool) {
	ns := p.shutdownAt.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// fetchLoop fetches until the source ends (true), ctx is done or the
// pipeline fails (false).
func (p *Pipeline) fetchLoop(ctx, work context.Context, shards []chan []Msg) (eof bool) {
	for ctx.Err() == nil {
		if p.tx != nil && p.Paused() && !p.txnPause(ctx, work) {
			return false
		}
		if !p.waitResumed(ctx) {
			return false
		}
		if p.tx != nil && !p.txnTurn(ctx, work) {
			return false
		}
		if !p.fetchOnce(ctx, work, shards) {
			return p.eof
		}
	}
	return false
}

// fetchOnce waits for room under max_in_flight, fetches and dispatches
// once; false when the loop must stop (p.eof says whether the source
// ended). In a transaction the wait and the fetch end when it is due.
func (p *Pipeline) fetchOnce(ctx, work context.Context, shards []chan []Msg) bool {
	fctx, cancel := p.txnFetchContext(ctx)
	defer cancel()
	for p.inflight.Load() >= int64(p.o.maxInFlight) {
		select {
		case <-p.space:
		case <-fctx.Done():
			return ctx.Err() == nil // the transaction is due
		case <-p.stop:
			return false
		}
	}
	var msgs []Msg
	var err error
	drained := false
	if bs, ok := p.src.(BoundedSource); ok {
		room := p.o.maxInFlight - int(p.inflight.Load())
		if p.tx != nil {
			// No more than the transaction's max_records (txnTurn ends
			// a full one before this).
			room = min(room, max(1, p.tx.maxRecs-p.tx.records))
		}
		msgs, err = bs.FetchUpTo(fctx, room)
		// Fewer records than asked for: the source has no more at
		// hand, and the workers' batches need not wait for any.
		drained = len(msgs) < room
	} else {
		msgs, err = p.src.Fetch(fctx)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			p.eof = true
			return false
		}
		if ctx.Err() != nil {
			return false
		}
		if fctx.Err() != nil {
			return true // the transaction is due
		}
		p.fail(fmt.Errorf("source: %w", err))
		return false
	}
	if len(msgs) == 0 {
		return true
	}
	if p.tx != nil {
		p.tx.add(len(msgs))
	}
	p.inflight.Add(int64(len(msgs)))
	p.n.in.Add(int64(len(msgs)))
	return p.dispatch(work, msgs, shards, drained)
}
