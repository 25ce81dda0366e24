package dlq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// TestGuardReplays: the dead-letter sink of GuardReplays does not write
// again the dead letter of a replayed record rejected again when the
// dead letter it names holds the same record; it writes one that claims
// to be a replay of another record (a forged header), one of a forced
// replay, and every one when the dead letters cannot be read.
func TestGuardReplays(t *testing.T) {
	b, _, topic, _ := setup(t, 5)
	r := dlq.NewReader(topic, dlq.WithClientOpts(kgo.SeedBrokers(b.Seeds...)))
	ctx := context.Background()
	es, _, err := r.List(ctx, dlq.Filter{}, 0)
	if err != nil || len(es) != 5 {
		t.Fatalf("%d dead letters, %v", len(es), err)
	}
	var written []record.Record
	sink := plugins.SinkFunc(func(_ context.Context, batch []record.Record) ([]error, error) {
		written = append(written, batch...)
		return make([]error, len(batch)), nil
	})
	g := dlq.GuardReplays(sink, r, nil)
	// Replays of dead letters 1 and 2, rejected again.
	again := func(i int) record.Record {
		orig, err := es[i].Original(topic)
		if err != nil {
			t.Fatal(err)
		}
		return pipeline.DeadLetter(orig, "a", "plug", errors.New("still bad"))
	}
	forged := again(3)
	forged.Value = []byte("something else entirely")
	forced := again(2)
	forced.SetHeader(dlq.HeaderReplayForce, []byte("1"))
	plain := pipeline.DeadLetter(record.Record{Topic: "src", Key: []byte("new"), Value: []byte("v")}, "a", "plug", errors.New("bad"))
	batch := []record.Record{again(1), plain, again(2), forged, forced}
	errs, err := g.Write(ctx, batch)
	if err != nil || len(errs) != len(batch) {
		t.Fatalf("Write: %v, %d answers", err, len(errs))
	}
	if len(written) != 3 || string(written[0].Key) != "new" || string(written[1].Value) != "something else entirely" {
		t.Fatalf("written: %d records (%+v); want the new one, the forged one and the forced one", len(written), written)
	}
	if v, _ := written[2].Header(dlq.HeaderReplayForce); string(v) != "1" || dlq.Skipped(g) != 2 {
		t.Fatalf("the forced one: %+v; skipped %d", written[2].Headers, dlq.Skipped(g))
	}
	// The dead letters cannot be read: every record is written.
	written = nil
	down := dlq.GuardReplays(sink, dlq.NewReader(topic, dlq.WithClientOpts(kgo.SeedBrokers("127.0.0.1:1"), kgo.RetryTimeout(time.Second)), dlq.WithIdleTimeout(time.Second)), nil)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := down.Write(cctx, []record.Record{again(1)}); err != nil || len(written) != 1 {
		t.Fatalf("with the dead letters out of reach: %v, %d written", err, len(written))
	}
}
