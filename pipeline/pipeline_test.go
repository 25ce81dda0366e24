package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
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

// upper uppercases values; it fails a whole batch that holds "poison" and
// rejects a record whose value contains "bad".
type upper struct{ calls atomic.Int64 }

func (u *upper) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	u.calls.Add(1)
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		v := string(r.Value)
		if strings.Contains(v, "poison") {
			return nil, errors.New("wasm trap: unreachable")
		}
		if strings.Contains(v, "bad") {
			out[i].Err = errors.New("not a v2 order")
			continue
		}
		r.Value = []byte(strings.ToUpper(v))
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

func fast() []pipeline.Option {
	return []pipeline.Option{pipeline.WithBatch(16, 1<<20, time.Millisecond), pipeline.WithRetry(time.Millisecond, 4*time.Millisecond, 0), pipeline.WithCommitInterval(5 * time.Millisecond)}
}

func TestOrderAndAck(t *testing.T) {
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			src := pipelinetest.NewSource(4, 500, 37)
			sink := &pipelinetest.Sink{}
			p := pipeline.New("t", src, sink, append(fast(), pipeline.WithWorkers(workers), pipeline.WithStages(pipeline.Stage{Name: "up", Transformer: &upper{}}))...)
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := sink.ByPartition()
			for part := int32(0); part < 4; part++ {
				if len(got[part]) != 500 {
					t.Fatalf("partition %d: %d records written, want 500", part, len(got[part]))
				}
				for o, v := range got[part] {
					if want := fmt.Sprintf("V%d-%d", part, o); v != want {
						t.Fatalf("partition %d position %d: %s, want %s (order lost)", part, o, v, want)
					}
				}
				for o, a := range src.Acked(part) {
					if a != int64(o) {
						t.Fatalf("partition %d: ack %d at position %d: acks out of order", part, a, o)
					}
				}
			}
			if s := p.Status(); s.State != pipeline.StateDone || s.In != 2000 || s.Out != 2000 || s.InFlight != 0 {
				t.Fatalf("status %+v", s)
			}
			if src.Commits() == 0 {
				t.Fatal("never committed")
			}
		})
	}
}

func TestPoisonRecordIsolatedToDLQ(t *testing.T) {
	src := pipelinetest.NewSource(1, 40, 40)
	src.Record(0, 17).Value = []byte("poison")
	src.Record(0, 30).Value = []byte("bad one")
	sink, dlq := &pipelinetest.Sink{}, &pipelinetest.Sink{}
	tr := &upper{}
	p := pipeline.New("t", src, sink, append(fast(), pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq), pipeline.WithStages(pipeline.Stage{Name: "down", Transformer: tr, Plugin: "orders-downgrade"}))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.Len() != 38 {
		t.Fatalf("sink got %d records, want 38", sink.Len())
	}
	if dlq.Len() != 2 {
		t.Fatalf("dlq got %d records, want 2", dlq.Len())
	}
	d := dlq.Records()[0]
	for k, want := range map[string]string{
		pipeline.HeaderError: "wasm trap: unreachable", pipeline.HeaderStage: "down", pipeline.HeaderPlugin: "orders-downgrade",
		pipeline.HeaderSourceTopic: "in", pipeline.HeaderSourcePartition: "0", pipeline.HeaderSourceOffset: "17",
	} {
		if v, _ := d.Header(k); string(v) != want {
			t.Errorf("dlq header %s = %q, want %q", k, v, want)
		}
	}
	if string(d.Value) != "poison" || string(d.Key) != "k17" {
		t.Errorf("dlq record lost key/value: %q %q", d.Key, d.Value)
	}
	if v, _ := dlq.Records()[1].Header(pipeline.HeaderError); string(v) != "not a v2 order" {
		t.Errorf("second dlq error %q", v)
	}
	if len(src.Acked(0)) != 40 {
		t.Fatalf("acked %d, want all 40 (pipeline.PolicyDLQ'd records are handled)", len(src.Acked(0)))
	}
}

func TestStopPolicyFailsAndDoesNotAck(t *testing.T) {
	src := pipelinetest.NewSource(1, 40, 40)
	src.Record(0, 20).Value = []byte("bad")
	p := pipeline.New("t", src, &pipelinetest.Sink{}, append(fast(), pipeline.WithStages(pipeline.Stage{Name: "down", Transformer: &upper{}}))...)
	err := p.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "in/0@20") || !strings.Contains(err.Error(), "not a v2 order") {
		t.Fatalf("err = %v, want it to name in/0@20 and the reason", err)
	}
	for _, o := range src.Acked(0) {
		if o >= 16 {
			t.Fatalf("offset %d acknowledged at or after the failing batch", o)
		}
	}
	if p.Status().State != pipeline.StateFailed || p.Ready() {
		t.Fatalf("state %v", p.Status().State)
	}
}

func TestTransientSinkErrorsRetried(t *testing.T) {
	src := pipelinetest.NewSource(2, 50, 100)
	sink := &pipelinetest.Sink{FailFirst: 3}
	p := pipeline.New("t", src, sink, append(fast(), pipeline.WithWorkers(1))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.Len() != 100 {
		t.Fatalf("wrote %d, want 100", sink.Len())
	}
	// Attempts are bounded when asked.
	sink2 := &pipelinetest.Sink{FailFirst: 1000}
	p2 := pipeline.New("t", pipelinetest.NewSource(1, 5, 5), sink2, append(fast(), pipeline.WithRetry(time.Millisecond, time.Millisecond, 4))...)
	if err := p2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "after 4 attempts") {
		t.Fatalf("err = %v", err)
	}
}

func TestBackpressureBoundsInFlight(t *testing.T) {
	src := pipelinetest.NewSource(1, 400, 10)
	sink := &pipelinetest.Sink{Delay: time.Millisecond}
	p := pipeline.New("t", src, sink, append(fast(), pipeline.WithBatch(10, 1<<20, time.Millisecond), pipeline.WithMaxInFlight(30))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A fetch happens only below the bound, and returns at most one chunk.
	if m := src.MaxAhead(); m > 30+10 {
		t.Fatalf("in flight reached %d, bound 30 (+ one fetch of 10)", m)
	}
	if sink.Len() != 400 {
		t.Fatalf("wrote %d", sink.Len())
	}
}

func TestShutdownDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := pipelinetest.NewSource(2, 200, 50)
		src.Block = true
		sink := &pipelinetest.Sink{Delay: 2 * time.Millisecond}
		ctx, cancel := context.WithCancel(context.Background())
		p := pipeline.New("t", src, sink, fast()...)
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		for src.Fetched() < 400 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := src.AckedN(); got != src.Fetched() || sink.Len() != 400 {
			t.Fatalf("acked %d of %d fetched, wrote %d", got, src.Fetched(), sink.Len())
		}
		if p.Status().State != pipeline.StateStopped {
			t.Fatalf("state %s", p.Status().State)
		}
	})
}

func TestShutdownTimeoutAbandons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := pipelinetest.NewSource(1, 10, 10)
		src.Block = true
		block := make(chan struct{})
		sink := sinkFunc(func(ctx context.Context, b []record.Record) ([]error, error) {
			select {
			case <-block:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return make([]error, len(b)), nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		p := pipeline.New("t", src, sink, append(fast(), pipeline.WithShutdownTimeout(50*time.Millisecond))...)
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		for src.Fetched() < 10 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		select {
		case err := <-done:
			t.Logf("Run after the shutdown timeout: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after the shutdown timeout")
		}
		if src.AckedN() != 0 {
			t.Fatal("an abandoned batch was acknowledged")
		}
	})
}

type sinkFunc func(context.Context, []record.Record) ([]error, error)

func (f sinkFunc) Write(ctx context.Context, b []record.Record) ([]error, error) { return f(ctx, b) }

func TestStaleRecordsDropped(t *testing.T) {
	src := pipelinetest.NewSource(2, 20, 40)
	src.Kill(1)
	sink := &pipelinetest.Sink{}
	p := pipeline.New("t", src, sink, fast()...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sink.ByPartition(); len(got[1]) != 0 || len(got[0]) != 20 {
		t.Fatalf("wrote %d of a revoked partition, %d of a live one", len(got[1]), len(got[0]))
	}
	if len(src.Acked(1)) != 0 {
		t.Fatal("records of a revoked partition were acknowledged")
	}
	if s := p.Status(); s.Dropped != 20 || s.InFlight != 0 {
		t.Fatalf("status %+v", s)
	}
}

// asyncSink completes writes out of order after random delays and fails
// every fifth write transiently, whole. written is what it wrote, in the
// order the writes began (an AsyncSink begins writing in call order).
type asyncSink struct {
	mu      sync.Mutex
	n       int
	written []record.Record
}

func (a *asyncSink) Write(context.Context, []record.Record) ([]error, error) {
	panic("an AsyncSink is written through WriteAsync")
}

func (a *asyncSink) WriteAsync(ctx context.Context, batch []record.Record, done func([]error, error)) {
	a.mu.Lock()
	a.n++
	n := a.n
	if n%5 != 0 {
		a.written = append(a.written, batch...)
	}
	a.mu.Unlock()
	go func() {
		time.Sleep(time.Duration(n*7%5) * time.Millisecond)
		if n%5 == 0 {
			done(nil, errors.New("leader not available"))
			return
		}
		done(make([]error, len(batch)), nil)
	}()
}

// TestAsyncSinkKeepsOrderAndAcks: with several batches in flight and some
// writes failing whole, every record is written, each partition's records
// end in the sink in order (a write after a failed one is written again
// after it: a replay), and acknowledgements come in offset order.
func TestAsyncSinkKeepsOrderAndAcks(t *testing.T) {
	src := pipelinetest.NewSource(3, 400, 50)
	sink := &asyncSink{}
	p := pipeline.New("t", src, sink, append(fast(), pipeline.WithWorkers(2))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if bad := pipelinetest.OutOfOrder(sink.written); bad != "" {
		t.Fatal(bad)
	}
	seen := map[int32]map[int64]bool{}
	for _, r := range sink.written {
		if seen[r.Partition] == nil {
			seen[r.Partition] = map[int64]bool{}
		}
		seen[r.Partition][r.Offset] = true
	}
	for part := int32(0); part < 3; part++ {
		if len(seen[part]) != 400 {
			t.Fatalf("partition %d: %d of 400 written", part, len(seen[part]))
		}
		if len(src.Acked(part)) != 400 {
			t.Fatalf("partition %d: %d acked", part, len(src.Acked(part)))
		}
		for i, o := range src.Acked(part) {
			if o != int64(i) {
				t.Fatalf("partition %d: ack %d at %d", part, o, i)
			}
		}
	}
	if s := p.Status(); s.Retries == 0 || s.Out != 1200 {
		t.Fatalf("status %+v: want retries and 1200 out", s)
	}
	t.Logf("%d records written for 1200 (the replays after failed writes)", len(sink.written))
}

type sickSink struct {
	pipelinetest.Sink
	mu  sync.Mutex
	err error
}

func (s *sickSink) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *sickSink) Health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func TestHealthReported(t *testing.T) {
	sink := &sickSink{}
	src := pipelinetest.NewSource(1, 1, 1)
	src.Block = true
	p := pipeline.New("t", src, sink, fast()...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitStatus(t, p, "ready", func(s pipeline.Status) bool { return s.Ready && s.Out == 1 })
	sink.setErr(errors.New("plugin crashed 5 times in 1m0s"))
	if p.Ready() || !strings.Contains(p.Status().Error, "crashed 5 times") {
		t.Fatalf("unhealthy sink not reported: %+v", p.Status())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// brokenPlugin fails every batch and reports itself failed after the
// first call, as a native plugin does after repeated crashes.
type brokenPlugin struct{ calls atomic.Int64 }

func (b *brokenPlugin) Transform(context.Context, []record.Record) ([]plugins.Result, error) {
	b.calls.Add(1)
	return nil, errors.New("plugin process exited")
}

func (b *brokenPlugin) Health() error {
	if b.calls.Load() > 0 {
		return errors.New("failed: 5 crashes within 1m0s")
	}
	return nil
}

func TestUnhealthyStageFailsPipelineNotRecords(t *testing.T) {
	src := pipelinetest.NewSource(1, 20, 20)
	dlq := &pipelinetest.Sink{}
	p := pipeline.New("t", src, &pipelinetest.Sink{}, append(fast(), pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq), pipeline.WithStages(pipeline.Stage{Name: "n", Transformer: &brokenPlugin{}}))...)
	err := p.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "5 crashes") {
		t.Fatalf("err = %v, want the pipeline to fail with the plugin's health", err)
	}
	if dlq.Len() != 0 || src.AckedN() != 0 {
		t.Fatalf("%d records dead-lettered and %d acked because the plugin broke", dlq.Len(), src.AckedN())
	}
}

// flakySink fails the records of one partition transiently for the first
// failFor calls, and counts how often each record (by value) was given to
// it, written or not.
type flakySink struct {
	mu      sync.Mutex
	calls   int
	failFor int
	part    int32
	offered map[string]int
	written map[string]int
}

func (f *flakySink) Write(_ context.Context, batch []record.Record) ([]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.offered == nil {
		f.offered, f.written = map[string]int{}, map[string]int{}
	}
	errs := make([]error, len(batch))
	for i, r := range batch {
		f.offered[string(r.Value)]++
		if r.Partition == f.part && f.calls <= f.failFor {
			errs[i] = plugins.Transient(errors.New("unable to dial: connection refused"))
			continue
		}
		f.written[string(r.Value)]++
	}
	return errs, nil
}

// TestTransientRecordErrorsRetriedAlone: a per-record error marked
// Transient (the broker of one partition is unreachable) is retried, for
// that record only, until it is written; it never reaches the error
// policy, and records already written are not sent again (the
// regression: a whole-batch retry wrote 49 records from 8, and
// transient errors went to the policy).
func TestTransientRecordErrorsRetriedAlone(t *testing.T) {
	for _, policy := range []pipeline.Policy{pipeline.PolicyStop, pipeline.PolicyDrop, pipeline.PolicyDLQ} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			src := pipelinetest.NewSource(3, 40, 30)
			sink := &flakySink{failFor: 5, part: 1}
			dlq := &pipelinetest.Sink{}
			p := pipeline.New("t", src, sink, append(fast(), pipeline.WithWorkers(1), pipeline.WithErrorPolicy(policy, dlq))...)
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			for v, n := range sink.written {
				if n != 1 {
					t.Errorf("record %s written %d times", v, n)
				}
			}
			for v, n := range sink.offered {
				if !strings.HasPrefix(v, "v1-") && n != 1 {
					t.Errorf("record %s of a healthy partition offered %d times", v, n)
				}
			}
			if s := p.Status(); len(sink.written) != 120 || s.Out != 120 || s.Errors != 0 || s.Dropped != 0 || dlq.Len() != 0 {
				t.Fatalf("%d of 120 written; status %+v, %d dead-lettered", len(sink.written), s, dlq.Len())
			}
		})
	}
}

// registryDown fails whole batches transiently for its first failFor
// calls (a schema registry that is down), then fails the records of
// partition 2 transiently once each, and uppercases.
type registryDown struct {
	mu      sync.Mutex
	calls   int
	failFor int
	flaked  map[int64]bool
	sizes   []int
}

func (s *registryDown) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.sizes = append(s.sizes, len(batch))
	if s.calls <= s.failFor {
		return nil, plugins.Transient(errors.New("schema registry: connection refused"))
	}
	if s.flaked == nil {
		s.flaked = map[int64]bool{}
	}
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		if r.Partition == 2 && !s.flaked[r.Offset] {
			s.flaked[r.Offset] = true
			out[i].Err = plugins.Transient(errors.New("schema registry: 503"))
			continue
		}
		r.Value = []byte(strings.ToUpper(string(r.Value)))
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

// TestTransientStageErrorRetried: a stage's batch error marked
// plugins.Transient retries the batch (it is not split record by record),
// and a transient per-record error retries that record; none reaches the
// error policy (a schema stage while the registry is down).
func TestTransientStageErrorRetried(t *testing.T) {
	src := pipelinetest.NewSource(3, 20, 60)
	sink, dlq := &pipelinetest.Sink{}, &pipelinetest.Sink{}
	st := &registryDown{failFor: 4}
	p := pipeline.New("t", src, sink, append(fast(), pipeline.WithWorkers(1), pipeline.WithBatch(60, 1<<20, time.Millisecond), pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq),
		pipeline.WithStages(pipeline.Stage{Name: "schema", Transformer: st}))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := p.Status(); sink.Len() != 60 || s.Errors != 0 || dlq.Len() != 0 {
		t.Fatalf("%d of 60 written, %d dead-lettered; status %+v", sink.Len(), dlq.Len(), s)
	}
	for _, n := range st.sizes[:st.failFor+1] {
		if n != 60 {
			t.Fatalf("batch sizes %v: a transient batch error was split", st.sizes)
		}
	}
	if got := st.sizes[st.failFor+1]; got != 20 {
		t.Fatalf("batch sizes %v: want the 20 records of partition 2 retried after the first pass", st.sizes)
	}
	// bounded attempts fail the pipeline, acknowledging nothing
	src2 := pipelinetest.NewSource(1, 5, 5)
	p2 := pipeline.New("t", src2, &pipelinetest.Sink{}, append(fast(), pipeline.WithRetry(time.Millisecond, time.Millisecond, 3),
		pipeline.WithStages(pipeline.Stage{Name: "schema", Transformer: &registryDown{failFor: 100}}))...)
	if err := p2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "after 3 attempts") || src2.AckedN() != 0 {
		t.Fatalf("err = %v, %d acked", err, src2.AckedN())
	}
}

// runFor runs p and fails the test if Run does not return within d.
func runFor(t *testing.T, p *pipeline.Pipeline, ctx context.Context, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Run did not return within %s; status %+v", d, p.Status())
		return nil
	}
}

// TestFailedPipelineDoesNotHangInFetch: a pipeline that fails (policy
// stop) while its source has nothing more to give (a Kafka poll blocks
// until records come) returns the error at once instead of waiting in
// the fetch forever (the regression: no log line, no exit).
func TestFailedPipelineDoesNotHangInFetch(t *testing.T) {
	src := pipelinetest.NewSource(1, 10, 10)
	src.Block = true
	src.Record(0, 3).Value = []byte("bad")
	p := pipeline.New("t", src, &pipelinetest.Sink{}, append(fast(), pipeline.WithStages(pipeline.Stage{Name: "down", Transformer: &upper{}}))...)
	err := runFor(t, p, context.Background(), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "in/0@3") {
		t.Fatalf("err = %v", err)
	}
}

// stuckSink blocks every write until its context is done, as a producer
// whose broker is gone; it reports ctx's error then.
type stuckSink struct{ calls atomic.Int64 }

func (s *stuckSink) Write(ctx context.Context, b []record.Record) ([]error, error) {
	s.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// silentAsync takes every write and never answers, as franz-go with a
// broker that is down holds records it may have sent.
type silentAsync struct {
	pipelinetest.Sink
	calls atomic.Int64
}

func (s *silentAsync) WriteAsync(ctx context.Context, b []record.Record, done func([]error, error)) {
	s.calls.Add(1)
}

// TestShutdownWhileSinkStuck: with the sink stuck and every queue full
// (workers, their write queues, the dispatch), cancelling Run's context
// (SIGTERM) returns within the shutdown timeout, for a sink that blocks
// and for an async sink that never answers; nothing is acknowledged
// (the regression: dispatch waited on the stop channel only, so
// shutdown_timeout never started and only SIGKILL worked).
func TestShutdownWhileSinkStuck(t *testing.T) {
	for _, tc := range []struct {
		name string
		sink plugins.Sink
	}{{"blocking", &stuckSink{}}, {"async-silent", &silentAsync{}}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := pipelinetest.NewSource(4, 5000, 200)
				src.Block = true
				ctx, cancel := context.WithCancel(context.Background())
				p := pipeline.New("t", src, tc.sink, append(fast(), pipeline.WithWorkers(2), pipeline.WithBatch(10, 1<<20, time.Millisecond),
					pipeline.WithMaxInFlight(100000), pipeline.WithShutdownTimeout(300*time.Millisecond))...)
				done := make(chan error, 1)
				go func() { done <- p.Run(ctx) }()
				// Wait until the fetch loop is blocked handing records on.
				deadline := time.Now().Add(10 * time.Second)
				for last := int64(-1); ; {
					time.Sleep(100 * time.Millisecond)
					n := src.Fetched()
					if n == last && n > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("fetching never blocked (%d fetched)", n)
					}
					last = n
				}
				start := time.Now()
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("Run ignored the cancel for 10 s with the sink stuck (shutdown timeout 300ms); status %+v", p.Status())
				}
				t.Logf("returned %s after the cancel", time.Since(start).Round(time.Millisecond))
				if src.AckedN() != 0 {
					t.Fatal("records were acknowledged though nothing was written")
				}
			})
		})
	}
}

// TestOversizeRecordDeadLettered: a record the sink rejects as too large
// goes to the pipeline.PolicyDLQ; when the pipeline.PolicyDLQ has the same limit, without its value
// (then also without its key and own headers if still too large), with
// the error and its origin (the regression: the dead-letter write
// failed the same way and failed the pipeline).
func TestOversizeRecordDeadLettered(t *testing.T) {
	tooLarge := func(limit int) func(r *record.Record) error {
		return func(r *record.Record) error {
			n := len(r.Key) + len(r.Value)
			for _, h := range r.Headers {
				n += len(h.Key) + len(h.Value)
			}
			if n > limit {
				return fmt.Errorf("%w: %d bytes, over max_record_bytes of %d", plugins.ErrRecordTooLarge, n, limit)
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name      string
		key, hdr  string
		truncated string
	}{
		{"value", "k", "", "value"},
		{"value-key-headers", strings.Repeat("K", 3000), strings.Repeat("H", 3000), "value,key,headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := pipelinetest.NewSource(1, 10, 10)
			big := src.Record(0, 4)
			big.Key, big.Value = []byte(tc.key), []byte(strings.Repeat("x", 5000))
			if tc.hdr != "" {
				big.Headers = []record.Header{{Key: "trace", Value: []byte(tc.hdr)}}
			}
			sink := &pipelinetest.Sink{Reject: tooLarge(1000)}
			dlq := &pipelinetest.Sink{Reject: tooLarge(1000)}
			p := pipeline.New("t", src, sink, append(fast(), pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq))...)
			if err := runFor(t, p, context.Background(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if sink.Len() != 9 || dlq.Len() != 1 {
				t.Fatalf("sink %d (want 9), dlq %d (want 1)", sink.Len(), dlq.Len())
			}
			d := dlq.Records()[0]
			hv := func(k string) string { v, _ := d.Header(k); return string(v) }
			if d.Value != nil || hv(pipeline.HeaderTruncated) != tc.truncated || hv(pipeline.HeaderValueBytes) != "5000" || hv(pipeline.HeaderSourceOffset) != "4" ||
				!strings.Contains(hv(pipeline.HeaderError), "over max_record_bytes of 1000") {
				t.Fatalf("dead letter: value %d bytes, headers %v", len(d.Value), d.Headers)
			}
			if tc.truncated == "value" && string(d.Key) != "k" {
				t.Fatalf("key %q lost though it fits", d.Key)
			}
			if tc.hdr != "" && (d.Key != nil || hv("trace") != "" || hv(pipeline.HeaderKeyBytes) != "3000") {
				t.Fatalf("second level kept key %d bytes / trace header; headers %v", len(d.Key), d.Headers)
			}
		})
	}
}

// lagSource is a blocking fakeSource that reports a lag and a condition.
type lagSource struct {
	*pipelinetest.Source
	mu   sync.Mutex
	lag  pipeline.LagMap
	cond error
}

func (s *lagSource) Lag() pipeline.LagMap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.lag)
}

func (s *lagSource) Condition() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cond
}

func (s *lagSource) set(lag pipeline.LagMap, cond error) {
	s.mu.Lock()
	s.lag, s.cond = lag, cond
	s.mu.Unlock()
}

// gateSink fails every write (the whole batch) while broken is set.
type gateSink struct {
	pipelinetest.Sink
	broken atomic.Bool
}

func (g *gateSink) Write(ctx context.Context, b []record.Record) ([]error, error) {
	if g.broken.Load() {
		return nil, errors.New("unable to dial: connection refused")
	}
	return g.Sink.Write(ctx, b)
}

func waitStatus(t *testing.T, p *pipeline.Pipeline, what string, ok func(pipeline.Status) bool) pipeline.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := p.Status()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never; status %+v", what, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadinessReportsStall: Ready is false, with the reason, while the
// pipeline has records in flight that it cannot write, or while its
// source cannot measure the lag (broker unreachable), or has lag and a
// failing fetch; it is true again once it progresses. An idle pipeline,
// or one whose only lag is a partition's trailing transaction marker, is
// ready. The regression: /readyz said 200 throughout every stall.
func TestReadinessReportsStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &lagSource{Source: pipelinetest.NewSource(2, 50, 20)}
		src.Block = true
		src.set(pipeline.LagMap{"in/0": 0, "in/1": 0}, nil)
		sink := &gateSink{}
		sink.broken.Store(true)
		p := pipeline.New("t", src, sink, append(fast(), pipeline.WithStallTimeout(300*time.Millisecond), pipeline.WithRetry(time.Millisecond, 20*time.Millisecond, 0))...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()

		s := waitStatus(t, p, "stalled with records in flight", func(s pipeline.Status) bool { return s.Stalled })
		if p.Ready() || s.Ready || !strings.Contains(s.Reason, "records in flight") || !strings.Contains(s.Reason, "connection refused") {
			t.Fatalf("stalled status %+v", s)
		}
		t.Logf("reason: %s", s.Reason)
		sink.broken.Store(false)
		s = waitStatus(t, p, "ready after the sink recovers", func(s pipeline.Status) bool { return s.Ready && s.Out == 100 })
		if s.Stalled || s.Reason != "" {
			t.Fatalf("recovered status %+v", s)
		}

		// Idle, and a trailing transaction marker: ready however long.
		src.set(pipeline.LagMap{"in/0": 1, "in/1": 0}, nil)
		time.Sleep(500 * time.Millisecond)
		if s := p.Status(); !s.Ready || s.Stalled {
			t.Fatalf("idle pipeline with lag 1 reported %+v", s)
		}
		// Lag unknown (broker unreachable): stalled.
		src.set(pipeline.LagMap{"in/0": pipeline.LagUnknown, "in/1": pipeline.LagUnknown}, errors.New("end offsets: dial tcp: connection refused"))
		s = waitStatus(t, p, "stalled with lag unknown", func(s pipeline.Status) bool { return s.Stalled })
		if s.Ready || !strings.Contains(s.Reason, "lag unknown for 2 of 2 partitions") || !strings.Contains(s.Reason, "source: end offsets") {
			t.Fatalf("status %+v", s)
		}
		b, err := json.Marshal(s)
		if err != nil || !strings.Contains(string(b), `"lag":{"in/0":"unknown","in/1":"unknown"}`) {
			t.Fatalf("json %s %v", b, err)
		}
		// Lag and a failing fetch: stalled. Lag known again and no error: ready.
		src.set(pipeline.LagMap{"in/0": 5, "in/1": 0}, nil)
		waitStatus(t, p, "ready again", func(s pipeline.Status) bool { return s.Ready })
		src.set(pipeline.LagMap{"in/0": 5, "in/1": 0}, errors.New("fetch: TOPIC_AUTHORIZATION_FAILED"))
		waitStatus(t, p, "stalled with lag and a failing fetch", func(s pipeline.Status) bool { return s.Stalled && !s.Ready })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
