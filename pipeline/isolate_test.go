package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// hangs stands for a guest that hangs, as the Wasm runtime reports it: a
// batch with a record whose value starts with "hang" (or any batch, with
// all) fails with plugins.ErrTimeout, at once (no real time passes).
type hangs struct {
	all   bool
	calls atomic.Int64
}

func (h *hangs) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	h.calls.Add(1)
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		if h.all || strings.HasPrefix(string(r.Value), "hang") {
			return nil, fmt.Errorf("plugin h: TRANSFORM: batch failed: %w after 5s", plugins.ErrTimeout)
		}
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

// TestIsolationBounded: isolating a failed batch no
// longer costs a call per record when the calls time out: the second
// record that times out alone fails the stage (it hangs, whatever the
// record; nothing acked), under stop the first record that fails alone
// ends it, and a single hanging record still goes to the DLQ.
func TestIsolationBounded(t *testing.T) {
	const n = 40 // one batch (WithBatch below)
	opts := func(tr plugins.Transformer, policy pipeline.Policy, dlq plugins.Sink) []pipeline.Option {
		return append(fast(), pipeline.WithBatch(n, 1<<20, 0), pipeline.WithErrorPolicy(policy, dlq),
			pipeline.WithStages(pipeline.Stage{Name: "s", Transformer: tr, Plugin: "h"}))
	}

	t.Run("every record hangs, dlq", func(t *testing.T) {
		src, sink, dlq := pipelinetest.NewSource(1, n, n), &pipelinetest.Sink{}, &pipelinetest.Sink{}
		h := &hangs{all: true}
		err := pipeline.New("t", src, sink, opts(h, pipeline.PolicyDLQ, dlq)...).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "plugin h timed out on 2 records of one batch alone") || !errors.Is(err, plugins.ErrTimeout) {
			t.Fatalf("err %v", err)
		}
		if c := h.calls.Load(); c != 1+pipeline.MaxIsolationTimeouts {
			t.Fatalf("%d calls, want the batch's and %d alone (was one per record: %d)", c, pipeline.MaxIsolationTimeouts, 1+n)
		}
		if sink.Len() != 0 || dlq.Len() != 0 || src.AckedN() != 0 {
			t.Fatalf("sink %d, dlq %d, acked %d: want nothing", sink.Len(), dlq.Len(), src.AckedN())
		}
	})

	t.Run("every record hangs, stop", func(t *testing.T) {
		src, sink := pipelinetest.NewSource(1, n, n), &pipelinetest.Sink{}
		h := &hangs{all: true}
		err := pipeline.New("t", src, sink, opts(h, pipeline.PolicyStop, nil)...).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "in/0@0 rejected by s") || !strings.Contains(err.Error(), "error policy: stop") {
			t.Fatalf("err %v", err)
		}
		if c := h.calls.Load(); c != 2 {
			t.Fatalf("%d calls, want the batch's and the first record's", c)
		}
	})

	t.Run("one record hangs, stop", func(t *testing.T) {
		src, sink := pipelinetest.NewSource(1, n, n), &pipelinetest.Sink{}
		src.Record(0, 10).Value = []byte("hang")
		h := &hangs{}
		var m pipeline.Counts
		p := pipeline.New("t", src, sink, opts(h, pipeline.PolicyStop, nil)...)
		err := p.Run(context.Background())
		m = p.Status().Counts
		if err == nil || !strings.Contains(err.Error(), "in/0@10 rejected by s") {
			t.Fatalf("err %v", err)
		}
		// The batch's call, records 0-9 and 10 alone; not 11-39.
		if c := h.calls.Load(); c != 1+11 || sink.Len() != 10 || m.Errors != 1 {
			t.Fatalf("%d calls, %d written, %d errors; want 12, the 10 before the hanging one, 1", c, sink.Len(), m.Errors)
		}
	})

	// A stop bound to happen when a batch is finished is not preceded by
	// the next batches' calls (each a timeout with a hanging plugin): the
	// worker takes no batch after one with a rejected record. The sink
	// answers late, as a Kafka producer does, so the worker would have run
	// the next batch by then.
	t.Run("one record hangs, stop, more batches", func(t *testing.T) {
		src, sink := pipelinetest.NewSource(1, 4*n, n), &lateSink{}
		src.Record(0, 10).Value = []byte("hang")
		h := &hangs{}
		err := pipeline.New("t", src, sink, opts(h, pipeline.PolicyStop, nil)...).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "in/0@10 rejected by s") {
			t.Fatalf("err %v", err)
		}
		if c := h.calls.Load(); c != 1+11 {
			t.Fatalf("%d calls, want 12: the first batch's call, records 0-9 and 10 alone, none of the next batches", c)
		}
	})

	t.Run("one record hangs, dlq", func(t *testing.T) {
		src, sink, dlq := pipelinetest.NewSource(1, n, n), &pipelinetest.Sink{}, &pipelinetest.Sink{}
		src.Record(0, 10).Value = []byte("hang")
		h := &hangs{}
		if err := pipeline.New("t", src, sink, opts(h, pipeline.PolicyDLQ, dlq)...).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if sink.Len() != n-1 || dlq.Len() != 1 || src.AckedN() != n {
			t.Fatalf("sink %d, dlq %d, acked %d", sink.Len(), dlq.Len(), src.AckedN())
		}
	})
}

// lateSink is an AsyncSink that answers each write 50 ms later.
type lateSink struct{ pipelinetest.Sink }

func (s *lateSink) WriteAsync(ctx context.Context, batch []record.Record, done func([]error, error)) {
	go func() {
		time.Sleep(50 * time.Millisecond)
		done(s.Write(ctx, batch))
	}()
}
