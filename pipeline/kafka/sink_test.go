package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/plugins"
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
	defer testenv.Close(t, context.Background(), sink)
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

// TestSinkBatchesInFlight: many batches written at once, as a pipeline's
// workers do, each record with its own key, value and header, arrive
// exactly as given, whatever the sizes of the batches before them: the
// franz-go records of a written batch are reused for later ones, so a slab
// handed out again too early, or not cleared, would show here as a record
// with another's fields. Every other batch is written as Msgs
// (WriteMsgsAsync, a pipeline's no-stage path), so both paths share the
// slabs.
func TestSinkBatchesInFlight(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: c.ListenAddrs(), Topic: "out", Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), sink)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[string]string{}
	done := make(chan []error, 64)
	next := 0
	for b := range 64 {
		batch := make([]record.Record, 1+(b*37)%300) // sizes up and down
		for i := range batch {
			k := fmt.Sprintf("k%05d", next)
			batch[i] = record.Record{Key: []byte(k), Value: []byte(fmt.Sprintf("v%d-%d", b, i))}
			if next%3 != 0 {
				batch[i].Headers = []record.Header{{Key: "seq", Value: []byte(k)}}
			}
			want[k] = fmt.Sprint(string(batch[i].Value), headers(kgoHeaders(batch[i].Headers)))
			next++
		}
		answer := func(errs []error, err error) {
			if err != nil {
				errs = append(errs, err)
			}
			done <- errs
		}
		if b%2 == 0 {
			sink.WriteAsync(ctx, batch, answer)
			continue
		}
		msgs := make([]pipeline.Msg, len(batch))
		for i := range batch {
			msgs[i].Record = batch[i]
		}
		sink.WriteMsgsAsync(ctx, msgs, answer)
	}
	for range 64 {
		for i, e := range <-done {
			if e != nil {
				t.Fatalf("record %d: %v", i, e)
			}
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]string{}
	n := 0
	for n < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", n, len(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			got[string(r.Key)] = fmt.Sprint(string(r.Value), headers(r.Headers))
		})
	}
	if n != len(want) || len(got) != len(want) {
		t.Fatalf("read %d records, %d distinct keys, want %d", n, len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("record %s: got %s, want %s", k, got[k], w)
		}
	}
}

func kgoHeaders(hs []record.Header) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	for _, h := range hs {
		out = append(out, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return out
}

// TestSinkCloseLateNothingBuffered: a sink whose every record was written
// closes without an error even when its deadline has passed, as it has
// when it belonged to a pipeline that failed (error policy stop) long
// before the daemon shuts down and whose shutdown deadline is long gone.
// It used to report "records not written by the deadline are dropped"
// (franz-go's Flush answers an expired context before it looks at its
// buffer), which was false: nothing was buffered.
func TestSinkCloseLateNothingBuffered(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 20 {
		sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: c.ListenAddrs(), Topic: "out", Partitions: 2})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs, err := sink.Write(ctx, []record.Record{{Key: []byte("k"), Value: []byte(fmt.Sprint(i))}})
		cancel()
		if err != nil || errs[0] != nil {
			t.Fatalf("write: %v %v", err, errs)
		}
		late, cancelLate := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		err = sink.Close(late)
		cancelLate()
		if err != nil {
			t.Fatalf("close %d with nothing buffered, after the deadline: %v", i, err)
		}
	}
}

// TestSinkMsgsAnswerInOrder: WriteMsgsAsync answers for each Msg at its
// own index, as WriteAsync does for records: a record over the sink's
// max_record_bytes gets ErrRecordTooLarge at its position, and the others
// arrive on their partitions (partition = "same"), in order.
func TestSinkMsgsAnswerInOrder(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: c.ListenAddrs(), Topic: "out", SamePartition: true, Partitions: 2, MaxRecordBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), sink)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs := []pipeline.Msg{
		{Record: record.Record{Key: []byte("a"), Value: []byte("0"), Partition: 1, Offset: 10}},
		{Record: record.Record{Key: []byte("b"), Value: make([]byte, 2000), Partition: 1, Offset: 11}},
		{Record: record.Record{Key: []byte("c"), Value: []byte("2"), Partition: 0, Offset: 12, Headers: []record.Header{{Key: "h", Value: []byte("x")}}}},
		{Record: record.Record{Key: []byte("d"), Value: []byte("3"), Partition: 1, Offset: 13}},
	}
	type answer struct {
		errs []error
		err  error
	}
	ch := make(chan answer, 1)
	sink.WriteMsgsAsync(ctx, msgs, func(errs []error, err error) { ch <- answer{errs, err} })
	a := <-ch
	if a.err != nil || len(a.errs) != len(msgs) {
		t.Fatalf("answer %v, %v: want %d per-record results", a.errs, a.err, len(msgs))
	}
	for i, e := range a.errs {
		if tooLarge := errors.Is(e, plugins.ErrRecordTooLarge); tooLarge != (i == 1) || (i != 1 && e != nil) {
			t.Errorf("record %d: %v", i, e)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]string{}
	for n := 0; n < 3; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 3 records: %v", n, got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			got[r.Partition] = append(got[r.Partition], fmt.Sprintf("%s%v", r.Key, headers(r.Headers)))
		})
	}
	if g, want := fmt.Sprint(got), "map[0:[c[h=x]] 1:[a[] d[]]]"; g != want {
		t.Fatalf("read %s, want %s", g, want)
	}
}
