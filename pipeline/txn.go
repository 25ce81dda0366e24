package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Transactor is implemented by sources that can make one unit of what the
// pipeline wrote since Begin (through sinks that take part in it) and the
// positions of every record fetched since: committed together, or not at
// all. A Kafka source does it with a Kafka transaction (exactly-once); see
// WithTransactions for how the pipeline runs one.
type Transactor interface {
	// Transactional reports whether the source is set up to run in
	// transactions; a pipeline whose source says false runs as without
	// a Transactor.
	Transactional() bool
	// Begin starts a transaction.
	Begin() error
	// End commits the transaction (commit true) or aborts it. It reports
	// whether it committed: false with a nil error means it was aborted
	// (asked to, or because the source lost partitions since Begin), and
	// the source reads again from its last committed positions. An error
	// is fatal: the pipeline fails.
	End(ctx context.Context, commit bool) (committed bool, err error)
}

// TxnObserver is told of every transaction ended by a pipeline that runs
// in transactions.
type TxnObserver interface {
	ObserveTxn(TxnDone)
}

// TxnDone is one transaction ended.
type TxnDone struct {
	Pipeline string
	// Committed is false for an abort.
	Committed bool
	// Records is how many records were fetched in it.
	Records int
	// Took is from its first record to its end (commit or abort).
	Took time.Duration
	// Ending is how long its End took (drain excluded).
	Ending time.Duration
	// Err is why it was aborted, if known.
	Err error
}

// Transactions are a pipeline's transaction counts, in Status.
type Transactions struct {
	Committed int64 `json:"committed"`
	Aborted   int64 `json:"aborted"`
	// Records is the records fetched in the transaction open now.
	Records int `json:"open_records"`
	// Last is when the last transaction ended.
	Last time.Time `json:"last,omitzero"`
}

// txnState is the transaction a pipeline has open, touched only by the
// fetch loop's goroutine (and by Run once the loop is over), except the
// counters.
type txnState struct {
	t        Transactor
	open     bool
	records  int
	first    time.Time // of its first record; zero while empty
	maxRecs  int
	interval time.Duration

	committed, aborted atomic.Int64
	openRecs           atomic.Int64
	last               atomic.Int64 // unix ns
}

// newTxn returns the transaction state of a source that runs in
// transactions, or nil.
func newTxn(src Source, o options) *txnState {
	t, ok := src.(Transactor)
	if !ok || !t.Transactional() {
		return nil
	}
	return &txnState{t: t, maxRecs: o.txnRecords, interval: o.txnInterval}
}

// due reports whether the open transaction should end now.
func (x *txnState) due(now time.Time) bool {
	return x.open && x.records > 0 && (x.records >= x.maxRecs || now.Sub(x.first) >= x.interval)
}

// deadline is when the open transaction is due by time, or zero.
func (x *txnState) deadline() time.Time {
	if !x.open || x.records == 0 {
		return time.Time{}
	}
	return x.first.Add(x.interval)
}

// add counts n fetched records into the open transaction.
func (x *txnState) add(n int) {
	if x.records == 0 {
		x.first = time.Now()
	}
	x.records += n
	x.openRecs.Store(int64(x.records))
}

// txnTurn runs in the fetch loop before each fetch: it ends the open
// transaction when it is due, once every record fetched in it is finished
// (written, or handled by the error policy), and begins one when none is
// open. It returns false when the loop must stop (ctx done, the pipeline
// failed); Run then ends what is open. The end itself runs on work, so
// that a shutdown that begins meanwhile does not cut it (only the shutdown
// timeout does).
func (p *Pipeline) txnTurn(ctx, work context.Context) bool {
	x := p.tx
	if x.due(time.Now()) {
		// Records go on being fetched into a transaction until it is
		// due; then nothing more is fetched until everything fetched in
		// it is finished, so that the positions it commits are exactly
		// those of what it wrote.
		if !p.waitFinished(ctx) || !p.endTxn(work, true) {
			return false
		}
	}
	if !x.open {
		if err := x.t.Begin(); err != nil {
			p.fail(errTxnEnds("begin transaction", err))
			return false
		}
		x.open, x.records, x.first = true, 0, time.Time{}
		x.openRecs.Store(0)
	}
	return true
}

// waitFinished waits until every record fetched is finished (written, or
// handled by the error policy), as a transaction must be before it ends.
// It returns false when ctx is done or the pipeline failed first.
func (p *Pipeline) waitFinished(ctx context.Context) bool {
	for p.inflight.Load() > 0 {
		select {
		case <-p.space:
		case <-ctx.Done():
			return false
		case <-p.stop:
			return false
		}
	}
	return true
}

// endTxn ends the open transaction, committing it if commit; it returns
// false when the pipeline failed.
func (p *Pipeline) endTxn(ctx context.Context, commit bool) bool {
	x := p.tx
	if !x.open {
		return true
	}
	start := time.Now()
	committed, err := x.t.End(ctx, commit)
	x.open = false
	x.openRecs.Store(0)
	now := time.Now()
	x.last.Store(now.UnixNano())
	d := TxnDone{Pipeline: p.name, Committed: committed, Records: x.records, Ending: now.Sub(start)}
	if !x.first.IsZero() {
		d.Took = now.Sub(x.first)
	}
	switch {
	case err != nil:
		d.Err = err
		x.aborted.Add(1)
	case committed:
		x.committed.Add(1)
		if x.records > 0 {
			p.progress()
		}
	default:
		x.aborted.Add(1)
		if commit {
			d.Err = errTxnAborted
			p.o.logger.Warn("transaction aborted: partitions moved since it began; reading again from the last commit", "pipeline", p.name, "records", x.records)
			p.noteTrouble(errTxnAborted)
		}
	}
	for _, o := range p.obs.txns {
		o.ObserveTxn(d)
	}
	if err != nil {
		// Cut by the shutdown timeout: abandoned, not failed (the broker
		// aborts it, or a restart's fencing does). Otherwise the end
		// failed for a transient cause (the broker timed the transaction
		// out during a stall, a fenced producer, a broker the client gave
		// up on): whether or not the broker committed it, the positions
		// are in the same transaction as the output, so a run from the
		// last committed positions loses and repeats nothing
		// (ErrTxnWrite: the daemon starts the pipeline again).
		p.failUnlessAborted(ctx, errTxnEnds(fmt.Sprintf("end transaction (commit %v)", commit), err))
		return false
	}
	return true
}

var errTxnAborted = errors.New("transaction aborted (the group rebalanced since it began)")

// txnFetchContext bounds a fetch by when the open transaction is due, so
// that a quiet source does not keep written records uncommitted.
func (p *Pipeline) txnFetchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.tx == nil {
		return ctx, func() {}
	}
	if dl := p.tx.deadline(); !dl.IsZero() {
		return context.WithDeadline(ctx, dl)
	}
	return ctx, func() {}
}

// txnStatus is Status.Transactions.
func (p *Pipeline) txnStatus() *Transactions {
	x := p.tx
	if x == nil {
		return nil
	}
	t := &Transactions{Committed: x.committed.Load(), Aborted: x.aborted.Load(), Records: int(x.openRecs.Load())}
	if ns := x.last.Load(); ns != 0 {
		t.Last = time.Unix(0, ns)
	}
	return t
}

// ErrTxnWrite is in the error a pipeline that runs in transactions fails
// with when a write inside a transaction, or the transaction's begin or
// end, failed for a transient cause: not the sink's verdict on a record
// (those go to the error policy), but a topic deleted under the pipeline,
// a fenced producer, a transaction the broker timed out, a broker the
// producer gave up on. An in-place retry would write the partition's
// records after it twice, so the pipeline fails and the transaction
// aborts; nothing of it is committed, and running the pipeline again reads
// from its last committed positions without loss or duplicate (the daemon
// does so by itself, after a backoff: docs/delivery.md).
var ErrTxnWrite = errors.New("failed inside a transaction")

// errTxnWrite is a write that failed inside a transaction (ErrTxnWrite).
func errTxnWrite(what string, cause error) error {
	return fmt.Errorf("%s %w, which is aborted (exactly-once: the pipeline starts again from the last committed transaction): %w", what, ErrTxnWrite, cause)
}

// errTxnEnds is a transaction's begin or end that failed (ErrTxnWrite).
func errTxnEnds(what string, cause error) error {
	return fmt.Errorf("%s: %w (%w: exactly-once, the pipeline starts again from its last committed transaction)", what, cause, ErrTxnWrite)
}
