package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
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
			if sleep(ctx, backoff) != nil {
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
// When ctx is done it stops fetching, drains in-flight work for at most the
// shutdown timeout, commits, and returns nil. It returns the error that
// failed the pipeline, if any. Run closes the source.
func (p *Pipeline) Run(ctx context.Context) error {
	defer p.src.Close()
	log := p.o.logger.With("pipeline", p.name)
	if p.o.policy == PolicyDLQ && p.dlq == nil {
		err := errors.New("error policy dlq without a dead-letter sink")
		p.fail(err)
		return err
	}
	if err := p.waitReady(ctx); err != nil {
		p.setState(StateStopped)
		return nil
	}
	p.progress()
	p.setState(StateRunning)
	log.Info("pipeline running", "stages", len(p.o.stages), "workers", p.o.workers)
	watchDone := make(chan struct{})
	defer close(watchDone)
	go p.watch(watchDone)

	// work is cancelled only when the shutdown timeout runs out: in-flight
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
	// up shutdown (the final commit below has its own bound).
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
	fetch, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	go func() {
		select {
		case <-p.stop:
			stopFetch()
		case <-fetch.Done():
		}
	}()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	// The shutdown timeout starts when ctx is done or the pipeline fails,
	// wherever Run is blocked then (a fetch, handing records to a full
	// worker, a stuck write): once it runs out, the work context is
	// cancelled and in-flight batches are abandoned, not committed.
	var shutdownStart atomic.Int64
	go func() {
		select {
		case <-ctx.Done():
		case <-p.stop:
		case <-drained:
			return
		}
		shutdownStart.Store(time.Now().UnixNano())
		t := time.NewTimer(p.o.shutdownTimeout)
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
		select {
		case <-drained:
		case <-time.After(abandonGrace):
			// A stage or sink that ignores its context: leave it behind
			// rather than hang the process.
			log.Error("workers did not stop after the shutdown timeout; leaving them", "grace", abandonGrace)
		}
	}
	stopCommits()
	<-commitDone
	// The final commit gets what is left of the shutdown timeout, at least
	// 2 s and at most 10 s.
	left := 10 * time.Second
	if t0 := shutdownStart.Load(); t0 != 0 {
		left = min(max(p.o.shutdownTimeout-time.Since(time.Unix(0, t0)), 2*time.Second), left)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), left)
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

// abandonGrace is how long Run waits, after the shutdown timeout cancelled
// the in-flight work, for the workers to return.
const abandonGrace = 5 * time.Second

// fetchLoop fetches until the source ends (true), ctx is done or the
// pipeline fails (false).
func (p *Pipeline) fetchLoop(ctx, work context.Context, shards []chan []Msg) (eof bool) {
	for ctx.Err() == nil {
		if p.tx != nil && !p.txnTurn(ctx) {
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
	if bs, ok := p.src.(BoundedSource); ok {
		msgs, err = bs.FetchUpTo(fctx, p.o.maxInFlight-int(p.inflight.Load()))
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
	return p.dispatch(work, msgs, shards)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
