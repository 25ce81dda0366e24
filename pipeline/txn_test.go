package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// txnLog is a log read in transactions, as a Kafka source under
// exactly-once: End commits the position of everything fetched since
// Begin together with what the sinks (txnSink) got since, or drops both
// and reads again from the last committed position. It checks what the
// pipeline must hold: no fetch outside a transaction, and a commit only
// when every record fetched in it was written or dead-lettered.
type txnLog struct {
	recs    []record.Record
	chunk   int
	block   bool // block at the end instead of io.EOF, as a Kafka poll does
	sinks   []*txnSink
	abortAt int // End asked to commit the abortAt-th transaction aborts it instead (a rebalance); 0: never
	// endDelay is how long End takes (unless its context ends first:
	// then it fails with the context's error); ending is told when an
	// End with records starts.
	endDelay time.Duration
	ending   chan struct{}
	// endErr, if set, is what the endErrAt-th End returns, having
	// aborted the transaction (the broker timed it out, a fenced
	// producer); beginErr is what every Begin returns.
	endErr   error
	endErrAt int
	beginErr error

	mu        sync.Mutex
	open      bool
	next      int // next to fetch
	committed int // next after the last commit
	ends      int
	commits   int
	aborts    int
	wrong     []string
}

func (l *txnLog) Transactional() bool { return true }

func (l *txnLog) Begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.beginErr != nil {
		return l.beginErr
	}
	if l.open {
		l.wrong = append(l.wrong, "Begin in an open transaction")
	}
	l.open = true
	return nil
}

func (l *txnLog) End(ctx context.Context, commit bool) (bool, error) {
	if l.endDelay > 0 {
		l.mu.Lock()
		some := l.next > l.committed
		l.mu.Unlock()
		if some && l.ending != nil {
			select {
			case l.ending <- struct{}{}:
			default:
			}
		}
		select {
		case <-time.After(l.endDelay):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		l.wrong = append(l.wrong, "End without a transaction")
	}
	l.open = false
	l.ends++
	if commit && l.abortAt == l.ends {
		commit = false // the group rebalanced since Begin
	}
	if l.endErr != nil && l.endErrAt == l.ends {
		for _, s := range l.sinks {
			s.end(false)
		}
		l.next = l.committed
		l.aborts++
		return false, l.endErr
	}
	fetched, written := l.next-l.committed, 0
	for _, s := range l.sinks {
		written += s.pendingLen()
	}
	if commit && written != fetched {
		l.wrong = append(l.wrong, fmt.Sprintf("commit %d: %d records fetched in it, %d written", l.ends, fetched, written))
	}
	for _, s := range l.sinks {
		s.end(commit)
	}
	if commit {
		l.committed = l.next
		l.commits++
	} else {
		l.next = l.committed
		l.aborts++
	}
	return commit, nil
}

func (l *txnLog) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	l.mu.Lock()
	if !l.open {
		l.wrong = append(l.wrong, "Fetch outside a transaction")
	}
	if l.next == len(l.recs) {
		l.mu.Unlock()
		if l.block {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, io.EOF
	}
	n := min(l.chunk, len(l.recs)-l.next)
	msgs := make([]pipeline.Msg, n)
	for i := range msgs {
		msgs[i].Record = l.recs[l.next+i]
	}
	l.next += n
	l.mu.Unlock()
	return msgs, nil
}

func (l *txnLog) Ack([]pipeline.Msg) {}
func (l *txnLog) Commit(context.Context) error {
	return errors.New("Commit called on a transactional source")
}
func (l *txnLog) Close(context.Context) error { return nil }

func (l *txnLog) result() (commits, aborts int, wrong []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commits, l.aborts, l.wrong
}

// txnSink keeps what it is written in the open transaction apart from
// what committed transactions wrote.
type txnSink struct {
	mu        sync.Mutex
	pending   []record.Record
	committed []record.Record
}

func (s *txnSink) Write(_ context.Context, batch []record.Record) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, batch...)
	return make([]error, len(batch)), nil
}

func (s *txnSink) pendingLen() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.pending) }

func (s *txnSink) end(commit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if commit {
		s.committed = append(s.committed, s.pending...)
	}
	s.pending = nil
}

func (s *txnSink) values() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, r := range s.committed {
		out[strings.ToLower(string(r.Value))]++
	}
	return out
}

func txnRecords(n int, bad ...int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Topic: "in", Partition: int32(i % 3), Offset: int64(i / 3), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
	}
	for _, i := range bad {
		recs[i].Value = []byte("bad")
	}
	return recs
}

// TestTxnCommitsWhatWasWritten: a transaction commits only once every
// record fetched in it is written or dead-lettered, and every record ends
// in exactly one committed transaction, with several workers, a DLQ, and
// an abort (a rebalance) in the middle.
func TestTxnCommitsWhatWasWritten(t *testing.T) {
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			const n = 3000
			out, dlq := &txnSink{}, &txnSink{}
			src := &txnLog{recs: txnRecords(n, 100, 2000), chunk: 37, sinks: []*txnSink{out, dlq}, abortAt: 3}
			p := pipeline.New("t", src, out, append(fast(), pipeline.WithWorkers(workers), pipeline.WithTransactions(500, time.Second),
				pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq), pipeline.WithStages(pipeline.Stage{Name: "up", Transformer: &upper{}}))...)
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			commits, aborts, wrong := src.result()
			if len(wrong) > 0 {
				t.Fatalf("%d violations, first: %s", len(wrong), wrong[0])
			}
			if aborts != 1 || commits < n/500 {
				t.Fatalf("%d commits, %d aborts; want at least %d and 1", commits, aborts, n/500)
			}
			got, dead := out.values(), dlq.values()
			for i := range n {
				v := fmt.Sprintf("v%d", i)
				if i == 100 || i == 2000 {
					v = "bad"
				}
				c := got[v]
				if v == "bad" {
					c = dead[v] / 2 // two of them
				}
				if c != 1 {
					t.Fatalf("record %d committed %d times, want once", i, c)
				}
			}
			s := p.Status()
			if s.Delivery != "exactly-once" || s.Transactions == nil || s.Transactions.Committed != int64(commits) || s.Transactions.Aborted != 1 {
				t.Fatalf("status: delivery %q, transactions %+v; want exactly-once, %d committed, 1 aborted", s.Delivery, s.Transactions, commits)
			}
		})
	}
}

// TestTxnStopAborts: policy stop aborts the open transaction: none of its
// records is committed, also those before the bad one.
func TestTxnStopAborts(t *testing.T) {
	out := &txnSink{}
	src := &txnLog{recs: txnRecords(1000, 700), chunk: 50, sinks: []*txnSink{out}}
	p := pipeline.New("t", src, out, append(fast(), pipeline.WithTransactions(400, time.Hour),
		pipeline.WithStages(pipeline.Stage{Name: "up", Transformer: &upper{}}))...)
	if err := p.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "error policy: stop") {
		t.Fatalf("err = %v, want the stop policy's", err)
	}
	commits, aborts, wrong := src.result()
	if len(wrong) > 0 {
		t.Fatalf("violations: %v", wrong)
	}
	got := out.values()
	if commits != 1 || aborts != 1 || len(got) != 400 {
		t.Fatalf("%d commits, %d aborts, %d records committed; want 1, 1 and the first transaction's 400", commits, aborts, len(got))
	}
	if got["v699"] != 0 {
		t.Fatal("a record of the aborted transaction was committed")
	}
}

// TestTxnQuietSourceCommits: a transaction is committed its interval
// after its first record even when no more records come (the fetch
// blocks), and a graceful stop commits what is open.
func TestTxnQuietSourceCommits(t *testing.T) {
	out := &txnSink{}
	src := &txnLog{recs: txnRecords(100), chunk: 100, block: true, sinks: []*txnSink{out}}
	p := pipeline.New("t", src, out, append(fast(), pipeline.WithTransactions(0, 50*time.Millisecond))...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for len(out.values()) < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 100 records committed after 20 s of a quiet source", len(out.values()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, _, wrong := src.result(); len(wrong) > 0 {
		t.Fatalf("violations: %v", wrong)
	}
}

// TestTxnShutdownDuringEnd: a graceful stop that begins while a
// transaction is being committed does not cut the commit (found by
// BenchmarkDelivery: "end transaction (commit true): context canceled"
// failed the pipeline).
func TestTxnShutdownDuringEnd(t *testing.T) {
	out := &txnSink{}
	src := &txnLog{recs: txnRecords(100), chunk: 100, block: true, sinks: []*txnSink{out}, endDelay: 100 * time.Millisecond, ending: make(chan struct{}, 1)}
	p := pipeline.New("t", src, out, append(fast(), pipeline.WithTransactions(0, 10*time.Millisecond))...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-src.ending:
	case <-time.After(20 * time.Second):
		t.Fatal("no transaction was ended in 20 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a stop during a commit failed the pipeline: %v", err)
	}
	commits, _, wrong := src.result()
	if len(wrong) > 0 || commits == 0 || len(out.values()) != 100 {
		t.Fatalf("%d commits, %d of 100 records committed, violations %v", commits, len(out.values()), wrong)
	}
}

// TestTxnFailedEndRestarts: a transaction whose begin or end fails for a
// cause other than the pipeline's own shutdown (the broker timed it out
// during a stall, the producer was fenced) fails the pipeline with
// ErrTxnWrite, which the daemon answers by starting it again from the
// last committed positions, as for a failed write inside a transaction;
// nothing of the failed transaction is committed. Before, such an error
// failed the pipeline for good (no ErrTxnWrite in it).
func TestTxnFailedEndRestarts(t *testing.T) {
	timedOut := errors.New("INVALID_PRODUCER_EPOCH: the broker aborted the transaction at its timeout")
	for _, tc := range []struct {
		name string
		src  func(out *txnSink) *txnLog
	}{
		{"end", func(out *txnSink) *txnLog {
			return &txnLog{recs: txnRecords(1000), chunk: 50, sinks: []*txnSink{out}, endErr: timedOut, endErrAt: 2}
		}},
		{"begin", func(out *txnSink) *txnLog {
			return &txnLog{recs: txnRecords(10), chunk: 50, sinks: []*txnSink{out}, beginErr: timedOut}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &txnSink{}
			src := tc.src(out)
			p := pipeline.New("t", src, out, append(fast(), pipeline.WithTransactions(400, time.Hour))...)
			err := p.Run(context.Background())
			if !errors.Is(err, pipeline.ErrTxnWrite) || !errors.Is(err, timedOut) {
				t.Fatalf("err = %v, want one with ErrTxnWrite and the cause", err)
			}
			commits, _, wrong := src.result()
			if len(wrong) > 0 {
				t.Fatalf("violations: %v", wrong)
			}
			if got := len(out.values()); got != 400*commits {
				t.Fatalf("%d records committed in %d commits; want only the committed transactions' %d", got, commits, 400*commits)
			}
		})
	}
}

// boundedTxnLog is a txnLog that is a pipeline.BoundedSource, as the
// Kafka source is: FetchUpTo returns at most n records.
type boundedTxnLog struct{ *txnLog }

func (l boundedTxnLog) FetchUpTo(ctx context.Context, n int) ([]pipeline.Msg, error) {
	l.mu.Lock()
	chunk := l.chunk
	l.chunk = min(chunk, n)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.chunk = chunk
		l.mu.Unlock()
	}()
	return l.Fetch(ctx)
}

// TestTxnMaxRecords: a transaction holds at most transaction.max_records
// records when the source can be asked for fewer (a Kafka source); it
// held a whole fetch, up to max_in_flight, before.
func TestTxnMaxRecords(t *testing.T) {
	out := &txnSink{}
	src := &txnLog{recs: txnRecords(3000), chunk: 1000, sinks: []*txnSink{out}}
	var sizes []int
	p := pipeline.New("t", boundedTxnLog{src}, out, append(fast(), pipeline.WithTransactions(100, time.Hour),
		pipeline.WithObserver(txnSizes(func(d pipeline.TxnDone) { sizes = append(sizes, d.Records) })))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, wrong := src.result(); len(wrong) > 0 {
		t.Fatalf("violations: %v", wrong)
	}
	if len(out.values()) != 3000 {
		t.Fatalf("%d records committed, want 3000", len(out.values()))
	}
	for i, n := range sizes {
		if n > 100 {
			t.Fatalf("transaction %d held %d records, want at most 100 (sizes %v)", i, n, sizes)
		}
	}
	if len(sizes) < 30 {
		t.Fatalf("%d transactions for 3000 records of at most 100 each", len(sizes))
	}
}

// txnSizes is a pipeline observer of transactions.
type txnSizes func(pipeline.TxnDone)

func (f txnSizes) ObserveTxn(d pipeline.TxnDone) { f(d) }
