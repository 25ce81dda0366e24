package pipeline_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// asyncOf makes a plugins.Sink an AsyncSink that answers on another
// goroutine.
type asyncOf struct{ *pipelinetest.Sink }

func (a asyncOf) WriteAsync(ctx context.Context, batch []record.Record, done func([]error, error)) {
	errs, err := a.Write(ctx, batch)
	go done(errs, err)
}

// TestZeroOptionsRun: a pipeline given 0 for every option runs with the
// defaults: it writes everything, with a plain and with an async sink
// (the regression: WithBatch(0, ...) with an async sink panicked, dividing
// by zero in a worker goroutine; WithMaxInFlight(0) never fetched and
// reported "stopped").
func TestZeroOptionsRun(t *testing.T) {
	zero := []pipeline.Option{pipeline.WithBatch(0, 0, 0), pipeline.WithWorkers(0), pipeline.WithMaxInFlight(0),
		pipeline.WithRetry(0, 0, 0), pipeline.WithShutdownTimeout(0), pipeline.WithCommitInterval(0), pipeline.WithStallTimeout(0)}
	for _, tc := range []struct {
		name string
		opts []pipeline.Option
	}{
		{"batch", zero[:1]}, {"max-in-flight", zero[2:3]}, {"all", zero},
	} {
		for _, async := range []bool{false, true} {
			name := tc.name + "/plain"
			if async {
				name = tc.name + "/async"
			}
			t.Run(name, func(t *testing.T) {
				src := pipelinetest.NewSource(3, 100, 40)
				mem := &pipelinetest.Sink{}
				var sink plugins.Sink = mem
				if async {
					sink = asyncOf{mem}
				}
				p := pipeline.New("t", src, sink, tc.opts...)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := p.Run(ctx); err != nil {
					t.Fatal(err)
				}
				if s := p.Status(); s.State != pipeline.StateDone || mem.Len() != 300 || src.AckedN() != 300 {
					t.Fatalf("wrote %d of 300, acked %d; status %+v", mem.Len(), src.AckedN(), s)
				}
			})
		}
	}
}

// TestRetryZeroBackoffDoesNotSpin: WithRetry(0, 0, 0) backs off with the
// defaults instead of retrying a failing write in a busy loop.
func TestRetryZeroBackoffDoesNotSpin(t *testing.T) {
	var calls atomic.Int64
	sink := sinkFunc(func(context.Context, []record.Record) ([]error, error) {
		calls.Add(1)
		return nil, errors.New("broker unavailable")
	})
	src := pipelinetest.NewSource(1, 1, 1)
	p := pipeline.New("t", src, sink, pipeline.WithRetry(0, 0, 0), pipeline.WithShutdownTimeout(-1))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// The default backoff (100 ms, doubling) allows about 4 attempts in
	// 0.5 s; a busy loop makes many thousands.
	if n := calls.Load(); n > 10 {
		t.Fatalf("%d writes in 0.5 s: the retry did not back off", n)
	}
}
