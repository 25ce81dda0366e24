package metrics_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/metrics"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// lagSource is a blocking pipelinetest.Source that reports a lag and a
// condition.
type lagSource struct {
	*pipelinetest.Source
	mu   sync.Mutex
	lag  pipeline.LagMap
	cond error
}

func (s *lagSource) Lag() pipeline.LagMap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lag
}

func (s *lagSource) Condition() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cond
}

// gather returns every sample of reg by metric name and labels, such as
// streamd_errors_total{pipeline=t,stage=sink}: a counter's or gauge's
// value, a histogram's sample count.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

func waitStatus(t *testing.T, p *pipeline.Pipeline, what string, ok func(pipeline.Status) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(p.Status()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never; status %+v", what, p.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStallAndUnknownLag: streamd_pipeline_stalled and
// streamd_pipeline_ready follow Status, and an unknown lag is NaN, not 0.
func TestStallAndUnknownLag(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	src := &lagSource{Source: pipelinetest.NewSource(1, 1, 1), lag: pipeline.LagMap{"in/0": pipeline.LagUnknown, "in/1": 3},
		cond: errors.New("end offsets: connection refused")}
	src.Block = true
	p := pipeline.New("t", src, &pipelinetest.Sink{}, pipeline.WithObserver(m), pipeline.WithStallTimeout(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitStatus(t, p, "stalled", func(s pipeline.Status) bool { return s.Stalled })
	got := gather(t, reg)
	if got["streamd_pipeline_stalled{pipeline=t}"] != 1 || got["streamd_pipeline_ready{pipeline=t}"] != 0 ||
		!math.IsNaN(got["streamd_consumer_lag{partition=0,pipeline=t,topic=in}"]) || got["streamd_consumer_lag{partition=1,pipeline=t,topic=in}"] != 3 {
		t.Fatalf("metrics %v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestPausedGauge: streamd_pipeline_paused follows Pause and Resume (an
// alert on lag must know a pipeline is paused on purpose), and
// streamd_pipeline_wedged is 0 for a paused pipeline.
func TestPausedGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	src := pipelinetest.NewSource(1, 10, 5)
	src.Block = true
	p := pipeline.New("t", src, &pipelinetest.Sink{}, pipeline.WithObserver(m), pipeline.WithStallTimeout(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitStatus(t, p, "running", func(s pipeline.Status) bool { return s.Out == 10 })
	if got := gather(t, reg); got["streamd_pipeline_paused{pipeline=t}"] != 0 {
		t.Fatalf("running: metrics %v", got)
	}
	p.Pause()
	if got := gather(t, reg); got["streamd_pipeline_paused{pipeline=t}"] != 1 || got["streamd_pipeline_wedged{pipeline=t}"] != 0 {
		t.Fatalf("paused: metrics %v", got)
	}
	p.Resume()
	if got := gather(t, reg); got["streamd_pipeline_paused{pipeline=t}"] != 0 {
		t.Fatalf("resumed: metrics %v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// rejectBad rejects records whose value holds "bad".
type rejectBad struct{}

func (rejectBad) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		if strings.Contains(string(r.Value), "bad") {
			out[i].Err = errors.New("not an order")
			continue
		}
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

// TestCountsFromStatus: the counters are the pipeline's own totals (each
// event counted once, by the pipeline), rejections by stage, every stage
// listed; batches reach the histogram; Remove forgets a pipeline, so one
// of the same name can take its place.
func TestCountsFromStatus(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	src := pipelinetest.NewSource(2, 50, 20)
	src.Record(0, 3).Value = []byte("bad")
	src.Record(1, 7).Value = []byte("bad")
	sink := &pipelinetest.Sink{Reject: func(r *record.Record) error {
		if r.Partition == 1 && r.Offset == 9 {
			return errors.New("too large")
		}
		return nil
	}}
	p := pipeline.New("t", src, sink, pipeline.WithObserver(m), pipeline.WithErrorPolicy(pipeline.PolicyDrop, nil),
		pipeline.WithStages(pipeline.Stage{Name: "check", Transformer: rejectBad{}}, pipeline.Stage{Name: "idle", Transformer: rejectBad{}}))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	for k, want := range map[string]float64{
		"streamd_records_in_total{pipeline=t}":         100,
		"streamd_records_out_total{pipeline=t}":        97,
		"streamd_records_dropped_total{pipeline=t}":    3,
		"streamd_records_dlq_total{pipeline=t}":        0,
		"streamd_errors_total{pipeline=t,stage=check}": 2,
		"streamd_errors_total{pipeline=t,stage=idle}":  0,
		"streamd_errors_total{pipeline=t,stage=sink}":  1,
		"streamd_records_in_flight{pipeline=t}":        0,
	} {
		v, ok := got[k]
		if !ok {
			t.Errorf("%s missing", k)
			continue
		}
		if v != want {
			t.Errorf("%s = %v, want %v", k, v, want)
		}
	}
	if got["streamd_batch_duration_seconds{pipeline=t}"] == 0 {
		t.Error("no batch observed in streamd_batch_duration_seconds")
	}
	// A second pipeline of the same name while the first is collected
	// makes Gather fail; after Remove it takes its place.
	p2 := pipeline.New("t", pipelinetest.NewSource(1, 1, 1), &pipelinetest.Sink{}, pipeline.WithObserver(m))
	if _, err := reg.Gather(); err == nil {
		t.Fatal("two pipelines named t collected without an error")
	}
	m.Remove(p)
	if err := p2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := gather(t, reg)["streamd_records_in_total{pipeline=t}"]; v != 1 {
		t.Fatalf("after Remove: records in %v, want the new pipeline's 1", v)
	}
}

// txnSource is a pipelinetest.Source that runs in transactions: every
// second one it is asked to commit aborts (a rebalance).
type txnSource struct {
	*pipelinetest.Source
	ends int
}

func (s *txnSource) Transactional() bool { return true }
func (s *txnSource) Begin() error        { return nil }
func (s *txnSource) End(_ context.Context, commit bool) (bool, error) {
	s.ends++
	return commit && s.ends%2 == 1, nil
}

// TestTransactions: an exactly-once pipeline's transactions are counted by
// result and their durations reach the histogram.
func TestTransactions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	src := &txnSource{Source: pipelinetest.NewSource(1, 100, 10)}
	p := pipeline.New("t", src, &pipelinetest.Sink{}, pipeline.WithObserver(m), pipeline.WithTransactions(20, time.Hour))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := p.Status()
	if s.Transactions == nil || s.Transactions.Committed == 0 || s.Transactions.Aborted == 0 {
		t.Fatalf("transactions %+v, want some committed and some aborted", s.Transactions)
	}
	got := gather(t, reg)
	for k, want := range map[string]float64{
		"streamd_transactions_total{pipeline=t,result=committed}":           float64(s.Transactions.Committed),
		"streamd_transactions_total{pipeline=t,result=aborted}":             float64(s.Transactions.Aborted),
		"streamd_transaction_duration_seconds{pipeline=t,result=committed}": float64(s.Transactions.Committed),
		"streamd_transaction_duration_seconds{pipeline=t,result=aborted}":   float64(s.Transactions.Aborted),
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

// failing rejects a record whose value is "no" and fails a call with a
// record "crash" as a crashed plugin does.
type failing struct{}

func (failing) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		switch string(r.Value) {
		case "crash":
			return nil, errors.Join(errors.New("batch failed"), plugins.ErrTrap)
		case "no":
			out[i].Err = errors.New("no")
			continue
		}
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

// TestStageErrorsByKind: streamd_stage_errors_total counts rejected
// records by plugin and kind (a crash is not a rejection).
func TestStageErrorsByKind(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	src := pipelinetest.NewSource(1, 10, 10)
	src.Record(0, 2).Value = []byte("crash")
	src.Record(0, 4).Value = []byte("no")
	src.Record(0, 6).Value = []byte("no")
	p := pipeline.New("t", src, &pipelinetest.Sink{}, pipeline.WithObserver(m), pipeline.WithBatch(10, 1<<20, time.Millisecond),
		pipeline.WithErrorPolicy(pipeline.PolicyDrop, nil), pipeline.WithStages(pipeline.Stage{Name: "s", Transformer: failing{}, Plugin: "f"}))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	for k, want := range map[string]float64{
		"streamd_stage_errors_total{kind=trap,pipeline=t,plugin=f}":     1,
		"streamd_stage_errors_total{kind=rejected,pipeline=t,plugin=f}": 2,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}
