package kafka_test

import (
	"bytes"
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline/kafka"
)

// fetchCount counts the fetch responses a client read.
type fetchCount struct{ n atomic.Int64 }

func (c *fetchCount) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		c.n.Add(1)
	}
}

// TestSourceReadsAhead: while the pipeline takes a fetch response a few
// records at a time (the room under max_in_flight), the client already
// fetches the next one. franz-go starts a broker's next fetch only once
// every record of its buffered one was polled, so a source that polled
// only the pipeline's room held the next fetch back until the pipeline had
// taken the whole response, and the pipeline then waited a fetch round
// trip with nothing to do: with the broker in another process, a
// passthrough moved 0.64-0.83 of the records/s of a franz-go loop that
// polls everything. The records still come out in order, each once.
func TestSourceReadsAhead(t *testing.T) {
	b := testenv.Kafka(t)
	topic, group := testenv.Topic(t, "in"), testenv.Topic(t, "g")
	createTopic(t, b.Seeds, topic, 1, nil)
	const n = 400
	// Batches of a few 1 KiB records, fetches of a few batches: a
	// response holds ~12 records.
	prod := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(4<<10))
	val := bytes.Repeat([]byte("x"), 1<<10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: val}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var fc fetchCount
	src, err := kafka.NewSource(kafka.SourceConfig{Seeds: b.Seeds, Topics: []string{topic}, Group: group,
		Opts: []kgo.Opt{kgo.FetchMaxPartitionBytes(16 << 10), kgo.FetchMaxBytes(16 << 10), kgo.WithHooks(&fc)}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CloseAtEnd(t, src)
	if err := src.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for len(got) == 0 {
		msgs, err := src.FetchUpTo(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) > 1 {
			t.Fatalf("FetchUpTo(1) returned %d records", len(msgs))
		}
		for _, m := range msgs {
			got = append(got, m.Record.Offset)
		}
	}
	// The pipeline holds one record of the first response; the client
	// has the rest of it, and should be fetching the next.
	waitFor(t, 10*time.Second, "a second fetch response while the first is being handed out", func() bool { return fc.n.Load() >= 2 })
	for len(got) < n {
		msgs, err := src.FetchUpTo(ctx, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) > 7 {
			t.Fatalf("FetchUpTo(7) returned %d records", len(msgs))
		}
		for _, m := range msgs {
			got = append(got, m.Record.Offset)
		}
	}
	for i, off := range got {
		if off != int64(i) {
			t.Fatalf("record %d has offset %d: want every offset once, in order (%v)", i, off, got[max(0, i-3):min(len(got), i+3)])
		}
	}
}
