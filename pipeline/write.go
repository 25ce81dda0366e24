package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/streamd/streamd/internal/x/wait"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// The write path. Every sink is written through one AsyncSink: a plain
// plugins.Sink is wrapped as one that writes on the caller's goroutine. A
// worker's writer hands it batches in order, keeps up to Pipeline.depth of
// them written and not yet finished (one for a plain sink: a batch is
// written once the previous one is acknowledged), and finishes them in
// order. A record that fails transiently is written again, and so is every
// later record of its source partition that was written after it, in
// order: a partition's records end in the sink in their order, at worst
// with a replay, never reordered (as Kafka's idempotent producer keeps a
// partition's order across its own retries; franz-go fails every buffered
// record of a partition when one batch of it fails). The same retry
// writes the dead letters.

// partKey is a source partition.
type partKey struct {
	topic     string
	partition int32
}

// writeResult is what a sink answered for one write: per-record errors,
// or an error for the whole write.
type writeResult struct {
	errs []error
	err  error
}

// syncSink is a plugins.Sink as an AsyncSink: WriteAsync writes and
// answers before it returns.
type syncSink struct{ plugins.Sink }

func (s syncSink) WriteAsync(ctx context.Context, batch []record.Record, done func([]error, error)) {
	errs, err := s.Write(ctx, batch)
	done(errs, err)
}

// writePath returns sink's write path and how many batches a worker may
// have written on it and not yet finished.
func writePath(sink plugins.Sink, o options) (AsyncSink, int) {
	if a, ok := sink.(AsyncSink); ok {
		// As many as max_in_flight allows, since that already bounds
		// what is between fetch and acknowledgement.
		return a, max(8, o.maxInFlight/o.maxRecords+1)
	}
	return syncSink{sink}, 1
}

// writeOnce writes recs on sink and waits for the answer, or for ctx.
func writeOnce(ctx context.Context, sink AsyncSink, recs []record.Record) writeResult {
	ch := make(chan writeResult, 1)
	sink.WriteAsync(ctx, recs, func(errs []error, err error) { ch <- writeResult{errs, err} })
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return writeResult{err: ctx.Err()}
	}
}

// check returns res as one error per record of n, a whole-write error
// marked transient for each; or an error when the sink answered for
// another number of records.
func (res writeResult) check(what string, n int) ([]error, error) {
	if res.err != nil {
		errs := make([]error, n)
		for i := range errs {
			errs[i] = plugins.Transient(res.err)
		}
		return errs, nil
	}
	if len(res.errs) != n {
		return nil, fmt.Errorf("%s returned %d results for %d records", what, len(res.errs), n)
	}
	return res.errs, nil
}

// settled reports whether res needs no retry: every record of n written
// or given the sink's verdict.
func (res writeResult) settled(n int) bool {
	if res.err != nil || len(res.errs) != n {
		return false
	}
	for _, e := range res.errs {
		if e != nil && errors.Is(e, plugins.ErrTransient) {
			return false
		}
	}
	return true
}

// settle takes first, the answers to a write of recs (one per record;
// keys[i] is recs[i]'s source partition), and writes again until every
// record is written or has the sink's verdict (an error not marked
// plugins.Transient), which it returns (nil where written). What is
// written again, in order: for each partition, the first record that
// failed transiently and every later record of that partition, written or
// not. Retries back off from retry_initial, doubling to retry_max, until
// ctx is done or retry_attempts (0: no limit) is used up, which is the
// only error returned.
func (p *Pipeline) settle(ctx context.Context, sink AsyncSink, what string, recs []record.Record, keys []partKey, first []error) ([]error, error) {
	final := make([]error, len(recs))
	errs := first
	var todo []int // the records errs answers for; nil: all of recs
	backoff := p.o.retryInitial
	for attempt := 1; ; attempt++ {
		var again []int
		var broken map[partKey]bool
		var cause error
		for k, e := range errs {
			i := k
			if todo != nil {
				i = todo[k]
			}
			switch {
			case e != nil && errors.Is(e, plugins.ErrTransient):
				if broken == nil {
					broken = map[partKey]bool{}
				}
				broken[keys[i]] = true
				again = append(again, i)
				if cause == nil {
					cause = e
				}
			case e == nil && broken[keys[i]]:
				again = append(again, i) // written after one of its partition failed
				final[i] = nil
			default:
				final[i] = e
			}
		}
		if len(again) == 0 {
			return final, nil
		}
		if p.tx != nil {
			return nil, errTxnWrite(what, cause)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", what, cause)
		}
		if p.o.retryAttempts > 0 && attempt >= p.o.retryAttempts {
			return nil, fmt.Errorf("%s failed after %d attempts: %w", what, attempt, cause)
		}
		p.noteRetry(what, len(again), attempt, backoff, cause)
		if wait.Sleep(ctx, backoff) != nil {
			return nil, fmt.Errorf("%s: %w", what, cause)
		}
		backoff = min(backoff*2, p.o.retryMax)
		sub := make([]record.Record, len(again))
		for k, i := range again {
			sub[k] = recs[i]
		}
		var err error
		if errs, err = writeOnce(ctx, sink, sub).check(what, len(sub)); err != nil {
			return nil, err
		}
		todo = again
	}
}

// noteRetry logs and counts a retried write or stage call.
func (p *Pipeline) noteRetry(what string, n, attempt int, backoff time.Duration, err error) {
	p.o.logger.Warn("write failed; retrying", "pipeline", p.name, "to", what, "records", n, "attempt", attempt, "backoff", backoff, "err", err)
	p.noteTrouble(fmt.Errorf("%s: %w", what, err))
	p.n.retries.Add(1)
}

// writer is one worker's way to the sink.
type writer struct {
	p *Pipeline
	// slots bounds the batches written and not yet finished (p.depth).
	slots chan struct{}
	// gate is held while a batch is written and queued, and by the
	// completer while it writes failed records again: nothing new is
	// written meanwhile.
	gate chan struct{}
	// queue holds the written batches in write order.
	queue     chan *pending
	completed chan struct{}
}

func (p *Pipeline) newWriter(ctx context.Context) *writer {
	w := &writer{p: p, slots: make(chan struct{}, p.depth), gate: make(chan struct{}, 1),
		queue: make(chan *pending, p.depth), completed: make(chan struct{})}
	go w.complete(ctx)
	return w
}

// close waits for the batches queued to be finished (or abandoned).
func (w *writer) close() {
	close(w.queue)
	<-w.completed
}

// submit writes pd's records and queues it for finishing; false when the
// pipeline failed or the shutdown timeout ran out first.
func (w *writer) submit(ctx context.Context, pd *pending) bool {
	p := w.p
	select {
	case w.slots <- struct{}{}:
	case <-p.stop:
		return false
	case <-ctx.Done():
		return false
	}
	select {
	case w.gate <- struct{}{}:
	case <-p.stop:
		<-w.slots
		return false
	case <-ctx.Done():
		<-w.slots
		return false
	}
	pd.done = make(chan struct{})
	answer := func(errs []error, err error) {
		pd.res = writeResult{errs, err}
		close(pd.done)
	}
	switch {
	case pd.n() == 0:
		close(pd.done)
	case pd.direct:
		p.msgs.WriteMsgsAsync(ctx, pd.batch, answer)
	default:
		p.out.WriteAsync(ctx, pd.recs, answer)
	}
	w.queue <- pd // never blocks: slots bound what is queued
	<-w.gate
	return true
}

// complete finishes the queued batches in order. When one needs records
// written again it holds the gate, waits for every batch written after it,
// writes again what settle says across all of them, and then finishes
// them in order.
func (w *writer) complete(ctx context.Context) {
	p := w.p
	defer close(w.completed)
	stop := func(err error) {
		if err != nil {
			p.failUnlessAborted(ctx, err)
		}
		for range w.queue { // acknowledge nothing after a failure
		}
	}
	wait := func(pd *pending) bool {
		select {
		case <-pd.done:
			return true
		case <-ctx.Done(): // the shutdown timeout ran out: acknowledge nothing more
			return false
		}
	}
	for pd := range w.queue {
		if !wait(pd) {
			stop(nil)
			return
		}
		window := []*pending{pd}
		if !pd.res.settled(pd.n()) {
			select {
			case w.gate <- struct{}{}:
			case <-ctx.Done():
				stop(nil)
				return
			}
			for n := len(w.queue); n > 0; n-- {
				next := <-w.queue
				if !wait(next) {
					<-w.gate
					stop(nil)
					return
				}
				window = append(window, next)
			}
			err := p.rewrite(ctx, window)
			<-w.gate
			if err != nil {
				stop(err)
				return
			}
		}
		for _, pd := range window {
			if err := p.finish(ctx, pd); err != nil {
				stop(err)
				return
			}
			<-w.slots
		}
	}
}

// rewrite settles the records of window, batches written in this order,
// and leaves each batch's verdicts in its res.
func (p *Pipeline) rewrite(ctx context.Context, window []*pending) error {
	var (
		recs  []record.Record
		keys  []partKey
		first []error
	)
	for _, pd := range window {
		errs, err := pd.res.check(SinkStage, pd.n())
		if err != nil {
			return err
		}
		recs = append(recs, pd.records()...)
		first = append(first, errs...)
		for i := range pd.n() {
			keys = append(keys, pd.key(i))
		}
	}
	final, err := p.settle(ctx, p.out, SinkStage, recs, keys, first)
	if err != nil {
		return err
	}
	for _, pd := range window {
		n := pd.n()
		pd.res = writeResult{errs: final[:n:n]}
		final = final[n:]
	}
	return nil
}
