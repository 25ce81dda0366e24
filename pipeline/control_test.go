package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// pausingSource is a pipelinetest.Source that counts PauseFetch/ResumeFetch.
type pausingSource struct {
	*pipelinetest.Source
	pauses, resumes atomic.Int64
}

func (s *pausingSource) PauseFetch()  { s.pauses.Add(1) }
func (s *pausingSource) ResumeFetch() { s.resumes.Add(1) }

// TestPauseResume: a paused pipeline fetches nothing more, finishes and
// acknowledges what is in flight, is ready and never stalled however long
// it stays paused, and on Resume goes on from where it stopped: every
// record written once, in order per partition.
func TestPauseResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &pausingSource{Source: pipelinetest.NewSource(3, 400, 10)}
		src.Block = true
		sink := &pipelinetest.Sink{Delay: 2 * time.Millisecond}
		p := pipeline.New("t", src, sink, append(fast(), pipeline.WithWorkers(2), pipeline.WithMaxInFlight(64), pipeline.WithStallTimeout(100*time.Millisecond))...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		waitStatus(t, p, "some records written", func(s pipeline.Status) bool { return s.Out >= 100 })
		if !p.Pause() || p.Pause() {
			t.Fatal("Pause: want true the first time, false the second")
		}
		if src.pauses.Load() != 1 {
			t.Fatalf("PauseFetch called %d times, want 1", src.pauses.Load())
		}
		s := waitStatus(t, p, "in-flight records finished", func(s pipeline.Status) bool { return s.InFlight == 0 })
		fetched, acked := src.Fetched(), src.AckedN()
		if fetched != acked {
			t.Fatalf("paused and drained: fetched %d, acked %d", fetched, acked)
		}
		// Stay paused for several stall timeouts: nothing is fetched, the
		// pipeline is ready and not stalled.
		time.Sleep(500 * time.Millisecond)
		s = p.Status()
		if !s.Paused || !s.Ready || s.Stalled || s.State != pipeline.StateRunning {
			t.Fatalf("paused status %+v", s)
		}
		if f := src.Fetched(); f != fetched {
			t.Fatalf("fetched %d more records while paused", f-fetched)
		}
		if fetched >= 1200 {
			t.Fatalf("everything was fetched before the pause took effect (%d); the test proves nothing", fetched)
		}
		if !p.Resume() || p.Resume() {
			t.Fatal("Resume: want true the first time, false the second")
		}
		s = waitStatus(t, p, "everything written after resume", func(s pipeline.Status) bool { return s.Out == 1200 })
		if s.Paused || src.resumes.Load() != 1 {
			t.Fatalf("after resume: %+v, ResumeFetch %d", s, src.resumes.Load())
		}
		for part, offs := range sink.ByPartition() {
			if len(offs) != 400 {
				t.Fatalf("partition %d: %d records, want 400", part, len(offs))
			}
			for i, v := range offs {
				if want := fmt.Sprint("v", part, "-", i); v != want {
					t.Fatalf("partition %d record %d is %s, want %s", part, i, v, want)
				}
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestStartPaused: pipeline.WithPaused(true) connects (ready) and fetches nothing
// until Resume; a shutdown while paused returns at once.
func TestStartPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &pausingSource{Source: pipelinetest.NewSource(1, 50, 10)}
		src.Block = true
		sink := &pipelinetest.Sink{}
		p := pipeline.New("t", src, sink, append(fast(), pipeline.WithPaused(true))...)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		s := waitStatus(t, p, "running, paused and ready", func(s pipeline.Status) bool { return s.State == pipeline.StateRunning && s.Paused && s.Ready })
		time.Sleep(100 * time.Millisecond)
		if src.Fetched() != 0 || src.pauses.Load() != 1 {
			t.Fatalf("started paused: fetched %d, PauseFetch %d; status %+v", src.Fetched(), src.pauses.Load(), s)
		}
		p.Resume()
		waitStatus(t, p, "written after resume", func(s pipeline.Status) bool { return s.Out == 50 })
		p.Pause()
		t0 := time.Now()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("stopping a paused pipeline took %s", d)
		}
	})
}

// condSink is a stuckSink that reports a condition (a broker it cannot
// reach).
type condSink struct{ stuckSink }

func (s *condSink) Condition() error { return errors.New("dial tcp 127.0.0.1:9: connection refused") }

// TestWedged: a pipeline whose sink blocks forever and says nothing, or
// whose every write is cut by the plugin call timeout, is wedged
// (systemd's watchdog stops); one whose sink reports why it cannot write
// (a broker down) or fails with another error is stalled but not wedged.
func TestWedged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sink   plugins.Sink
		wedged bool
	}{
		{"silent", &stuckSink{}, true},
		{"plugin-timeouts", sinkFunc(func(context.Context, []record.Record) ([]error, error) {
			return nil, fmt.Errorf("sink plugin: %w", plugins.ErrTimeout)
		}), true},
		{"failing-writes", sinkFunc(func(context.Context, []record.Record) ([]error, error) {
			return nil, errors.New("database is down")
		}), false},
		{"broker-down", &condSink{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := pipelinetest.NewSource(1, 10, 10)
				src.Block = true
				p := pipeline.New("t", src, tc.sink, append(fast(), pipeline.WithStallTimeout(100*time.Millisecond), pipeline.WithShutdownTimeout(-1))...)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- p.Run(ctx) }()
				s := waitStatus(t, p, "stalled", func(s pipeline.Status) bool { return s.Stalled })
				if s.Wedged != tc.wedged {
					t.Fatalf("wedged = %v, want %v; status %+v", s.Wedged, tc.wedged, s)
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatalf("Run: %v", err)
				}
			})
		})
	}
}

// pauseAfterFetch is a txnLog that pauses its pipeline after its first
// fetch that returns records.
type pauseAfterFetch struct {
	*txnLog
	p    *pipeline.Pipeline
	once sync.Once
}

func (s *pauseAfterFetch) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	msgs, err := s.txnLog.Fetch(ctx)
	if len(msgs) > 0 {
		s.once.Do(func() { s.p.Pause() })
	}
	return msgs, err
}

// TestPauseCommitsTransaction: pausing a pipeline that runs in
// transactions ends the open transaction once what was fetched in it is
// written, and commits it: left open while paused, its records would stay
// uncommitted (invisible to read_committed consumers, the offsets not
// moving) and the broker would abort it at its transaction timeout. On
// synctest's fake clock: the hour-long transaction interval never comes.
func TestPauseCommitsTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &txnSink{}
		log := &txnLog{recs: txnRecords(300), chunk: 100, block: true, sinks: []*txnSink{out}}
		src := &pauseAfterFetch{txnLog: log}
		// A transaction is due after 10,000 records or 1 h: only the pause
		// can end the first one in time.
		p := pipeline.New("t", src, out, append(fast(), pipeline.WithTransactions(0, time.Hour))...)
		src.p = p
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		waitStatus(t, p, "the open transaction committed while paused", func(s pipeline.Status) bool {
			return s.Paused && s.Transactions != nil && s.Transactions.Committed == 1
		})
		if n := len(out.values()); n != 100 {
			t.Fatalf("paused: %d records committed, want the 100 fetched before the pause", n)
		}
		time.Sleep(100 * time.Millisecond)
		if s := p.Status(); s.Transactions.Committed != 1 || s.Transactions.Aborted != 0 || len(out.values()) != 100 {
			t.Fatalf("while paused: %+v, %d records committed", s.Transactions, len(out.values()))
		}
		p.Resume()
		cancel() // a graceful drain commits what is open
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, _, wrong := log.result(); len(wrong) > 0 {
			t.Fatalf("violations: %v", wrong)
		}
	})
}
