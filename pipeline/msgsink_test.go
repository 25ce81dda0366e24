package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/record"
)

// msgSink is a pipeline.MsgSink over a pipelinetest.Sink that answers on
// another goroutine and counts the writes of each kind.
type msgSink struct {
	*pipelinetest.Sink
	async, msgs atomic.Int64
}

func (m *msgSink) WriteAsync(ctx context.Context, batch []record.Record, done func([]error, error)) {
	m.async.Add(1)
	errs, err := m.Write(ctx, batch)
	go done(errs, err)
}

func (m *msgSink) WriteMsgsAsync(ctx context.Context, msgs []pipeline.Msg, done func([]error, error)) {
	m.msgs.Add(1)
	recs := make([]record.Record, len(msgs))
	for i := range msgs {
		recs[i] = msgs[i].Record
	}
	errs, err := m.Write(ctx, recs)
	go done(errs, err)
}

// TestMsgSinkNoStage: a pipeline with no stage writes each batch through
// a MsgSink's WriteMsgsAsync, the records read where the source put them
// (it used to copy every batch into a []record.Record
// first), and keeps what the copying path guarantees: a record the sink
// rejects goes to the dead-letter sink named by its own topic, partition
// and offset, a record that fails transiently is written again with the
// later records of its partition (each partition in order, a replay,
// never a reordering), and every record is acknowledged in order.
func TestMsgSinkNoStage(t *testing.T) {
	src := pipelinetest.NewSource(3, 200, 30)
	transient := failOnce(0, 3, 150)
	mem := &pipelinetest.Sink{Reject: func(r *record.Record) error {
		if r.Partition == 1 && (r.Offset == 7 || r.Offset == 120) {
			return errors.New("INVALID_RECORD")
		}
		return transient(r)
	}}
	sink, dlq := &msgSink{Sink: mem}, &pipelinetest.Sink{}
	p := pipeline.New("t", src, sink, append(fast(), pipeline.WithWorkers(2), pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.msgs.Load() == 0 {
		t.Fatalf("no batch written through WriteMsgsAsync (%d through WriteAsync)", sink.async.Load())
	}
	recs := mem.Records()
	if bad := pipelinetest.OutOfOrder(recs); bad != "" {
		t.Fatal(bad)
	}
	n := map[int32]map[int64]bool{}
	for _, r := range recs {
		if n[r.Partition] == nil {
			n[r.Partition] = map[int64]bool{}
		}
		n[r.Partition][r.Offset] = true
		if want := fmt.Sprintf("v%d-%d", r.Partition, r.Offset); string(r.Value) != want || string(r.Key) != fmt.Sprintf("k%d", r.Offset) {
			t.Fatalf("%s/%d@%d: value %q", r.Topic, r.Partition, r.Offset, r.Value)
		}
	}
	if len(n[0]) != 200 || len(n[1]) != 198 || len(n[2]) != 200 {
		t.Fatalf("distinct offsets written per partition: %d %d %d, want 200 198 200", len(n[0]), len(n[1]), len(n[2]))
	}
	if dlq.Len() != 2 {
		t.Fatalf("dlq got %d records, want 2", dlq.Len())
	}
	for i, want := range []string{"7", "120"} {
		d := dlq.Records()[i]
		for k, v := range map[string]string{pipeline.HeaderSourcePartition: "1", pipeline.HeaderSourceOffset: want, pipeline.HeaderStage: pipeline.SinkStage, pipeline.HeaderError: "INVALID_RECORD"} {
			if got, _ := d.Header(k); !strings.Contains(string(got), v) {
				t.Errorf("dead letter %d: header %s = %q, want %q", i, k, got, v)
			}
		}
	}
	for part := int32(0); part < 3; part++ {
		acked := src.Acked(part)
		if len(acked) != 200 {
			t.Fatalf("partition %d: %d of 200 acknowledged", part, len(acked))
		}
		for i, o := range acked {
			if o != int64(i) {
				t.Fatalf("partition %d: ack %d at %d", part, o, i)
			}
		}
	}
	if s := p.Status(); s.Out != 598 || s.Errors != 2 || s.Retries == 0 {
		t.Fatalf("status %+v: want 598 out, 2 errors, retries", s)
	}
}

// TestMsgSinkWithStage: with a stage the sink is given the stage's
// output, through WriteAsync: never the input Msgs.
func TestMsgSinkWithStage(t *testing.T) {
	src := pipelinetest.NewSource(2, 50, 20)
	sink := &msgSink{Sink: &pipelinetest.Sink{}}
	p := pipeline.New("t", src, sink, append(fast(), pipeline.WithStages(pipeline.Stage{Name: "up", Transformer: &upper{}}))...)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.msgs.Load() != 0 {
		t.Fatalf("%d batches written through WriteMsgsAsync: the input, not the stage's output", sink.msgs.Load())
	}
	if sink.Len() != 100 {
		t.Fatalf("wrote %d, want 100", sink.Len())
	}
	for _, r := range sink.Records() {
		if string(r.Value) != strings.ToUpper(string(r.Value)) {
			t.Fatalf("%d@%d: value %q not the stage's output", r.Partition, r.Offset, r.Value)
		}
	}
}
