package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// errBatchText is how a loader words a whole call's failure (the Wasm
// runtime's ErrBatch, the native supervisor's "batch failed"); pipeline
// tests stand for it with the same text.
var errBatchText = fmt.Errorf("batch failed")

// crashes stands for a guest that crashes, as the Wasm runtime reports it:
// a call with a record whose value starts with "panic" fails as a whole,
// with a multi-line message (the guest's panic, then a stack trace); one
// with "ask" fails with ERR_BATCH; a record "no" is rejected.
type crashes struct{}

func (crashes) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		v := string(r.Value)
		switch {
		case strings.HasPrefix(v, "panic"):
			return nil, fmt.Errorf("plugin c: TRANSFORM: %w: %w", errBatchText,
				fmt.Errorf("%w: panicked at src/lib.rs:12:5: boom: %w", plugins.ErrTrap,
					fmt.Errorf("wasm error: unreachable\nwasm stack trace:\n\tc.transform(i32)\n\tc.streamd_process(i32) i32")))
		case strings.HasPrefix(v, "ask"):
			return nil, fmt.Errorf("plugin c: TRANSFORM: %w (ERR_BATCH): cannot serve this", errBatchText)
		case v == "no":
			out[i].Err = fmt.Errorf("no: not a v2 order")
			continue
		}
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

type rejections struct {
	mu sync.Mutex
	rs []pipeline.Rejection
}

func (o *rejections) ObserveReject(r pipeline.Rejection) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rs = append(o.rs, r)
}

// TestRecordErrorReadsWell: the error of a record that failed a call alone
// names its cause first, not the whole batch's failure ("batch failed:"),
// the dead letter's streamd-error is that one line (the stack trace in
// streamd-error-detail), streamd-error-kind says how it failed, and the
// stop policy's error names the record and that cause.
func TestRecordErrorReadsWell(t *testing.T) {
	src, sink, dlq := pipelinetest.NewSource(1, 10, 10), &pipelinetest.Sink{}, &pipelinetest.Sink{}
	src.Record(0, 3).Value = []byte("panic")
	src.Record(0, 5).Value = []byte("ask")
	src.Record(0, 7).Value = []byte("no")
	obs := &rejections{}
	p := pipeline.New("t", src, sink, append(fast(), pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq), pipeline.WithObserver(obs),
		pipeline.WithStages(pipeline.Stage{Name: "s", Transformer: crashes{}, Plugin: "c"}))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if dlq.Len() != 3 {
		t.Fatalf("dlq %d, want 3", dlq.Len())
	}
	want := []struct{ err, detail, kind string }{
		{"plugin crashed: panicked at src/lib.rs:12:5: boom: wasm error: unreachable", "wasm stack trace:\n\tc.transform(i32)\n\tc.streamd_process(i32) i32", "trap"},
		{"plugin c: TRANSFORM: call failed (ERR_BATCH): cannot serve this", "", "failed"},
		{"no: not a v2 order", "", "rejected"},
	}
	for i, d := range dlq.Records() {
		h := func(k string) string { v, _ := d.Header(k); return string(v) }
		if got := h("streamd-error"); got != want[i].err {
			t.Errorf("dead letter %d: streamd-error %q, want %q", i, got, want[i].err)
		}
		if got := h("streamd-error-detail"); got != want[i].detail {
			t.Errorf("dead letter %d: streamd-error-detail %q, want %q", i, got, want[i].detail)
		}
		if got := h("streamd-error-kind"); got != want[i].kind {
			t.Errorf("dead letter %d: streamd-error-kind %q, want %q", i, got, want[i].kind)
		}
	}
	if len(obs.rs) != 3 || obs.rs[0].Kind != pipeline.KindTrap || obs.rs[1].Kind != pipeline.KindFailed || obs.rs[2].Kind != pipeline.KindRejected {
		t.Errorf("rejections %+v: want kinds trap, failed, rejected", obs.rs)
	}
	got := p.Status().ErrorKinds
	if got["c"]["trap"] != 1 || got["c"]["failed"] != 1 || got["c"]["rejected"] != 1 {
		t.Errorf("Status.ErrorKinds %v: want c: trap 1, failed 1, rejected 1", got)
	}

	src = pipelinetest.NewSource(1, 10, 10)
	src.Record(0, 3).Value = []byte("panic")
	err := pipeline.New("t", src, &pipelinetest.Sink{}, append(fast(),
		pipeline.WithStages(pipeline.Stage{Name: "s", Transformer: crashes{}, Plugin: "c"}))...).Run(context.Background())
	const wantStop = "record in/0@3 rejected by s: plugin crashed: panicked at src/lib.rs:12:5: boom: wasm error: unreachable"
	if err == nil || !strings.HasPrefix(err.Error(), wantStop) || strings.Contains(err.Error(), "batch failed") {
		t.Fatalf("stop: %v\nwant it to start %q, without \"batch failed\"", err, wantStop)
	}
}

// TestDeadLetterErrorHeaderOneLine: a dead letter's streamd-error is one
// line, whatever the error; the lines after it go to streamd-error-detail.
func TestDeadLetterErrorHeaderOneLine(t *testing.T) {
	d := pipeline.DeadLetter(record.Record{Topic: "in", Value: []byte("v")}, "s", "c", fmt.Errorf("first\r\nsecond\nthird"))
	h := func(k string) string { v, _ := d.Header(k); return string(v) }
	if h("streamd-error") != "first" || h("streamd-error-detail") != "second\nthird" || h("streamd-error-kind") != "rejected" {
		t.Fatalf("headers %q %q %q", h("streamd-error"), h("streamd-error-detail"), h("streamd-error-kind"))
	}
	long := strings.Repeat("x", 10000)
	d = pipeline.DeadLetter(record.Record{Topic: "in"}, "s", "", fmt.Errorf("%s\n%s", long, long))
	if n := len(h("streamd-error")); n > 4096 || !strings.HasSuffix(h("streamd-error"), "...") {
		t.Fatalf("streamd-error %d bytes, want at most 4096 ending in ...", n)
	}
	if n := len(h("streamd-error-detail")); n > 4096 {
		t.Fatalf("streamd-error-detail %d bytes, want at most 4096", n)
	}
}
