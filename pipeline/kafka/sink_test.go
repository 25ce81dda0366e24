package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/record"
)

// TestSinkWritesHeaders: a batch whose records carry no, several or one
// header (and a null header value) arrives with each record's own headers,
// in order, on the partition it was read from (partition = "same").
func TestSinkWritesHeaders(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: c.ListenAddrs(), Topic: "out", SamePartition: true, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	batch := []record.Record{
		{Key: []byte("a"), Value: []byte("0"), Partition: 0},
		{Key: []byte("b"), Value: []byte("1"), Partition: 1, Headers: []record.Header{{Key: "h1", Value: []byte("x")}, {Key: "h2"}, {Key: "h1", Value: []byte("y")}}},
		{Key: []byte("c"), Value: []byte("2"), Partition: 0, Headers: []record.Header{{Key: "only", Value: []byte("z")}}},
		{Key: []byte("d"), Value: []byte("3"), Partition: 1},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs, err := sink.Write(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("record %d: %v", i, e)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]string{}
	for len(got) < len(batch) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(got), len(batch))
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = fmt.Sprint(r.Partition, headers(r.Headers)) })
	}
	for _, in := range batch {
		var hs []kgo.RecordHeader
		for _, h := range in.Headers {
			hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if want := fmt.Sprint(in.Partition, headers(hs)); got[string(in.Key)] != want {
			t.Errorf("record %s: got %s, want %s", in.Key, got[string(in.Key)], want)
		}
	}
}

func headers(hs []kgo.RecordHeader) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, h.Key+"="+string(h.Value))
	}
	return slices.Clip(out)
}
