package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/record"
)

// recorder is an observer of every kind.
type recorder struct {
	mu      sync.Mutex
	news    []*pipeline.Pipeline
	calls   []pipeline.StageCall
	rejects []pipeline.Rejection
	batches []pipeline.BatchDone
}

func (r *recorder) ObserveNew(p *pipeline.Pipeline) {
	r.mu.Lock()
	r.news = append(r.news, p)
	r.mu.Unlock()
}
func (r *recorder) ObserveStage(c pipeline.StageCall) {
	r.mu.Lock()
	c.In = slices.Clone(c.In) // the observer must not keep the slice
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recorder) ObserveReject(j pipeline.Rejection) {
	r.mu.Lock()
	rec := *j.Record
	j.Record = &rec
	r.rejects = append(r.rejects, j)
	r.mu.Unlock()
}

func (r *recorder) ObserveBatch(b pipeline.BatchDone) {
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
}

// onlyStages observes stage calls only.
type onlyStages struct{ n int }

func (o *onlyStages) ObserveStage(pipeline.StageCall) { o.n++ }

// TestObservers: each kind of observer is told what it asked for: the new
// pipeline, every stage call (batch calls and the one-record calls that
// isolate a poison record), every rejected input record once (a stage's
// and the sink's, with the policy), every acknowledged batch.
func TestObservers(t *testing.T) {
	src := pipelinetest.NewSource(1, 40, 40)
	src.Record(0, 17).Value = []byte("poison")
	src.Record(0, 30).Value = []byte("bad one")
	sink := &pipelinetest.Sink{Reject: func(r *record.Record) error {
		if r.Offset == 35 {
			return errors.New("too large")
		}
		return nil
	}}
	rec, stages := &recorder{}, &onlyStages{}
	p := pipeline.New("obs", src, sink, append(fast(), pipeline.WithWorkers(1), pipeline.WithBatch(40, 1<<20, 0),
		pipeline.WithErrorPolicy(pipeline.PolicyDrop, nil), pipeline.WithObserver(rec, stages, nil),
		pipeline.WithStages(pipeline.Stage{Name: "up", Transformer: &upper{}, Plugin: "upper"}))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rec.news) != 1 || rec.news[0] != p {
		t.Fatalf("ObserveNew: %v", rec.news)
	}
	// One batch call that fails (the poison record), then 40 one-record calls.
	if len(rec.calls) != 41 || rec.calls[0].Err == nil || rec.calls[0].Out != nil || len(rec.calls[0].In) != 40 || stages.n != 41 {
		t.Fatalf("%d stage calls (the only-stages observer saw %d), first %+v", len(rec.calls), stages.n, rec.calls[0])
	}
	for _, c := range rec.calls[1:] {
		if c.Pipeline != "obs" || c.Stage != "up" || len(c.In) != 1 || (c.Err == nil) != (len(c.Out) == 1) {
			t.Fatalf("one-record call %+v", c)
		}
	}
	got := map[int64]string{}
	for _, j := range rec.rejects {
		if j.Pipeline != "obs" || j.Policy != pipeline.PolicyDrop {
			t.Fatalf("rejection %+v", j)
		}
		got[j.Record.Offset] = j.Stage + "/" + j.Plugin
	}
	if len(rec.rejects) != 3 || got[17] != "up/upper" || got[30] != "up/upper" || got[35] != pipeline.SinkStage+"/" {
		t.Fatalf("rejections %v", got)
	}
	n := 0
	for _, b := range rec.batches {
		n += b.Records
	}
	if n != 40 || rec.batches[0].Written != 37 || rec.batches[0].Rejected != 3 {
		t.Fatalf("batches %+v", rec.batches)
	}
	if s := p.Status(); s.Rejected["up"] != 2 || s.Rejected[pipeline.SinkStage] != 1 || s.Errors != 3 || s.Dropped != 3 {
		t.Fatalf("status %+v", s)
	}
}
