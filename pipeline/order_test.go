package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// failOnce returns a Reject function that fails each record of
// partition part at the given offsets transiently, once.
func failOnce(part int32, offsets ...int64) func(r *record.Record) error {
	var mu sync.Mutex
	left := map[int64]bool{}
	for _, o := range offsets {
		left[o] = true
	}
	return func(r *record.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if r.Partition == part && left[r.Offset] {
			delete(left, r.Offset)
			return plugins.Transient(errors.New("NOT_LEADER_FOR_PARTITION"))
		}
		return nil
	}
}

// TestTransientRetryKeepsPartitionOrder: a record that fails transiently
// is written again, and the records of its partition written after it are
// written again after it, so that each partition's records end in the
// sink in order (a replay, never a reordering), with a plain sink and
// with an async sink that has later batches in flight; other partitions
// are not written again. The regression: a retried record landed
// after later records of its partition, which breaks per-key order in the
// output.
func TestTransientRetryKeepsPartitionOrder(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprint("async=", async), func(t *testing.T) {
			src := pipelinetest.NewSource(3, 200, 30)
			mem := &pipelinetest.Sink{Reject: failOnce(1, 5, 90)}
			var sink plugins.Sink = mem
			if async {
				sink = asyncOf{mem}
			}
			p := pipeline.New("t", src, sink, append(fast(), pipeline.WithWorkers(2), pipeline.WithErrorPolicy(pipeline.PolicyStop, nil))...)
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			recs := mem.Records()
			if bad := pipelinetest.OutOfOrder(recs); bad != "" {
				t.Fatal(bad)
			}
			n := map[int32]int{}
			for _, r := range recs {
				n[r.Partition]++
			}
			if n[0] != 200 || n[2] != 200 || n[1] < 200 {
				t.Fatalf("written per partition %v: want 200 of 0 and 2 (once each), at least 200 of 1", n)
			}
			for part := int32(0); part < 3; part++ {
				for i, o := range src.Acked(part) {
					if o != int64(i) {
						t.Fatalf("partition %d: ack %d at %d", part, o, i)
					}
				}
			}
			if s := p.Status(); s.Out != 600 || s.Errors != 0 {
				t.Fatalf("status %+v", s)
			}
			t.Logf("partition 1: %d records written for 200", n[1])
		})
	}
}
