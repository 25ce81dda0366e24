package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
)

// frozenSource is a source whose broker froze: a commit blocks until its
// context is done, and so does closing (a group leave), or, when
// ignoreCtx is set, a Close that ignores its context (it returns when the
// test ends).
type frozenSource struct {
	*pipelinetest.Source
	ignoreCtx bool
	released  chan struct{}

	mu             sync.Mutex
	commitDeadline time.Time // of the last commit
	closeDeadline  time.Time
	closed         bool
}

func (s *frozenSource) Commit(ctx context.Context) error {
	d, _ := ctx.Deadline()
	s.mu.Lock()
	s.commitDeadline = d
	s.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (s *frozenSource) Close(ctx context.Context) error {
	d, _ := ctx.Deadline()
	s.mu.Lock()
	s.closeDeadline = d
	s.mu.Unlock()
	if !s.ignoreCtx {
		<-ctx.Done()
		return ctx.Err()
	}
	<-s.released
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// TestShutdownOneDeadline: with the broker frozen (the sink never answers,
// commits and the group leave block), Run returns within the shutdown
// timeout after its context is cancelled (SIGTERM): draining, the final
// commit and closing the source share one deadline, the shutdown timeout
// after the cancel. The regression, SIGTERM during a fault: the final commit got
// 2-10 s more, the leave 5 s more, and a Close blocked on a frozen broker
// held the process until the broker woke (35 s with shutdown_timeout 5s).
func TestShutdownOneDeadline(t *testing.T) {
	const timeout = time.Second
	// Run may overrun its deadline by the close grace (100 ms), and by
	// the 10 ms polling of Status; nothing else on synctest's fake clock.
	const slack = 110 * time.Millisecond
	for _, tc := range []struct {
		name      string
		ignoreCtx bool
	}{{"close-context", false}, {"close-ignores-context", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := &frozenSource{Source: pipelinetest.NewSource(4, 500, 50), ignoreCtx: tc.ignoreCtx, released: make(chan struct{})}
				t.Cleanup(func() { close(fs.released) })
				fs.Block = true
				sink := &silentAsync{}
				p := pipeline.New("t", fs, sink, append(fast(), pipeline.WithShutdownTimeout(timeout), pipeline.WithCommitInterval(time.Hour))...)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- p.Run(ctx) }()
				waitStatus(t, p, "records in flight", func(s pipeline.Status) bool { return s.InFlight > 0 && sink.calls.Load() > 0 })
				if _, ok := p.ShutdownDeadline(); ok {
					t.Fatal("a shutdown deadline before the shutdown")
				}
				start := time.Now()
				cancel()
				select {
				case err := <-done:
					t.Logf("Run returned %v after %s", err, time.Since(start).Round(time.Millisecond))
				case <-time.After(timeout + 30*time.Second):
					t.Fatalf("Run did not return 30 s after the shutdown timeout (%v); status %+v", timeout, p.Status())
				}
				took := time.Since(start)
				if took > timeout+slack {
					t.Errorf("Run returned %s after the cancel; shutdown timeout %v", took.Round(time.Millisecond), timeout)
				}
				end, ok := p.ShutdownDeadline()
				if !ok || end.Before(start.Add(timeout)) || end.After(start.Add(timeout+slack)) {
					t.Errorf("ShutdownDeadline %v (ok %v); want the cancel + %v", end.Sub(start), ok, timeout)
				}
				fs.mu.Lock()
				defer fs.mu.Unlock()
				if fs.commitDeadline.IsZero() || fs.commitDeadline.After(end) {
					t.Errorf("final commit's deadline %v after the cancel, past the shutdown's (%v)", fs.commitDeadline.Sub(start), end.Sub(start))
				}
				if fs.closeDeadline.IsZero() || fs.closeDeadline.After(end) {
					t.Errorf("Close's deadline %v after the cancel, past the shutdown's (%v)", fs.closeDeadline.Sub(start), end.Sub(start))
				}
				if fs.closed {
					t.Error("the blocked Close returned before the test released it")
				}
				if fs.AckedN() != 0 {
					t.Errorf("%d records acknowledged though the sink wrote nothing", fs.AckedN())
				}
			})
		})
	}
}
