package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// deadLetters writes n dead letters of records read from src (partition
// i%3, offset i) to the DLQ topic: every 10th rejected by stage "b" with
// "bad schema", the others by "a" with "value too odd"; every 25th
// truncated (as the pipeline sends an oversize one).
func deadLetters(t *testing.T, cl *kgo.Client, topic, src string, n int) {
	t.Helper()
	var krs []*kgo.Record
	for i := range n {
		in := record.Record{Topic: src, Partition: int32(i % 3), Offset: int64(i), Key: []byte(fmt.Sprintf("k%d", i)),
			Value: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: []record.Header{{Key: "trace", Value: []byte(fmt.Sprint(i))}}}
		stage, msg := "a", "value too odd"
		if i%10 == 0 {
			stage, msg = "b", "Bad Schema at $.n"
		}
		d := pipeline.DeadLetter(in, stage, "plug", errors.New(msg))
		if i%25 == 24 {
			d.Value = nil
			d.SetHeader(pipeline.HeaderTruncated, []byte("value"))
		}
		kr := &kgo.Record{Topic: topic, Partition: 0, Key: d.Key, Value: d.Value}
		for _, h := range d.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		krs = append(krs, kr)
	}
	if err := cl.ProduceSync(context.Background(), krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func setup(t *testing.T, n int) (*testenv.Broker, *kgo.Client, string, string) {
	t.Helper()
	b := testenv.Kafka(t)
	topic, src := testenv.Topic(t, "dlq"), testenv.Topic(t, "src")
	b.CreateTopic(t, topic, 1)
	b.CreateTopic(t, src, 3)
	cl := b.Client(t, kgo.RecordPartitioner(dlq.Partitioner()))
	deadLetters(t, cl, topic, src, n)
	return b, cl, topic, src
}

func TestList(t *testing.T) {
	b, _, topic, src := setup(t, 100)
	r := dlq.NewReader(topic, dlq.WithClientOpts(kgo.SeedBrokers(b.Seeds...)))
	ctx := context.Background()
	tests := []struct {
		name  string
		f     dlq.Filter
		limit int
		want  int
		more  bool
		first int64
	}{
		{"all", dlq.Filter{}, 0, 100, false, 0},
		{"limit", dlq.Filter{}, 7, 7, true, 0},
		{"stage", dlq.Filter{Stage: "b"}, 0, 10, false, 0},
		{"error text ignores case", dlq.Filter{Error: "bad schema"}, 0, 10, false, 0},
		{"range", dlq.Filter{From: 40, Until: 60}, 0, 20, false, 40},
		{"range and stage", dlq.Filter{From: 41, Until: 60, Stage: "b"}, 0, 1, false, 50},
		{"source topic", dlq.Filter{SourceTopic: src}, 0, 100, false, 0},
		{"other source topic", dlq.Filter{SourceTopic: "nope"}, 0, 0, false, 0},
		{"from past the end", dlq.Filter{From: 500}, 0, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es, more, err := r.List(ctx, tt.f, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != tt.want || more != tt.more {
				t.Fatalf("got %d entries (more %v), want %d (more %v)", len(es), more, tt.want, tt.more)
			}
			if len(es) > 0 && es[0].Offset != tt.first {
				t.Fatalf("first at %d, want %d", es[0].Offset, tt.first)
			}
			for i := 1; i < len(es); i++ {
				if es[i].Offset <= es[i-1].Offset {
					t.Fatalf("not in offset order: %d after %d", es[i].Offset, es[i-1].Offset)
				}
			}
		})
	}
	e, err := r.Get(ctx, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	want := dlq.Position{Topic: src, Partition: 2, Offset: 50}
	if e.Stage != "b" || e.Error != "Bad Schema at $.n" || e.Plugin != "plug" || e.Source != want || e.Truncated != "" {
		t.Fatalf("entry 50: %+v", e)
	}
	if _, err := r.Get(ctx, 0, 5000); err == nil || !strings.Contains(err.Error(), "no record at 0@5000") {
		t.Fatalf("Get past the end: %v", err)
	}
	if _, _, err := r.List(ctx, dlq.Filter{Partitions: []int32{3}}, 0); err == nil || !strings.Contains(err.Error(), "no partition 3") {
		t.Fatalf("missing partition: %v", err)
	}
}

func TestOriginal(t *testing.T) {
	in := record.Record{Topic: "orders", Partition: 2, Offset: 77, Key: []byte("k"), Value: []byte("v"),
		Headers: []record.Header{{Key: "trace", Value: []byte("t1")}}}
	d := pipeline.DeadLetter(in, "st", "pl", errors.New("boom"))
	d.Topic, d.Partition, d.Offset = "orders-dlq", 1, 9
	e := dlq.FromRecord(d)
	got, err := e.Original("orders-dlq")
	if err != nil {
		t.Fatal(err)
	}
	if got.Topic != "orders" || got.Partition != 2 || got.Offset != 77 || string(got.Key) != "k" || string(got.Value) != "v" {
		t.Fatalf("original: %+v", got)
	}
	if len(got.Headers) != 3 || got.Headers[0].Key != "trace" || got.Headers[1].Key != dlq.HeaderReplayOf || string(got.Headers[1].Value) != "orders-dlq/1@9" ||
		got.Headers[2].Key != dlq.HeaderReplayCount || string(got.Headers[2].Value) != "1" {
		t.Fatalf("headers: %+v", got.Headers)
	}
	// The dead letter of a replayed record: one replay more.
	again := pipeline.DeadLetter(got, "st", "pl", errors.New("boom"))
	again.Topic, again.Partition, again.Offset = "orders-dlq", 1, 12
	e2 := dlq.FromRecord(again)
	got2, err := e2.Original("orders-dlq")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := got2.Header(dlq.HeaderReplayCount); string(v) != "2" {
		t.Fatalf("replayed twice: count %q, headers %+v", v, got2.Headers)
	}
	got.Value[0] = 'x'
	if string(d.Value) != "v" {
		t.Fatal("Original shares bytes with the dead letter")
	}
	d.SetHeader(pipeline.HeaderTruncated, []byte("value"))
	e = dlq.FromRecord(d)
	if _, err := e.Original("orders-dlq"); !errors.Is(err, dlq.ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
	e = dlq.FromRecord(record.Record{Value: []byte("not a dead letter")})
	if _, err := e.Original("x"); err == nil || !strings.Contains(err.Error(), "not a streamd dead letter") {
		t.Fatalf("foreign record: %v", err)
	}
}

// failing fails its nth call (1-based), after taking nothing.
type failing struct {
	next dlq.Target
	n    int
	call int
}

func (f *failing) Replay(ctx context.Context, recs []record.Record) error {
	f.call++
	if f.call == f.n {
		return errors.New("target down")
	}
	return f.next.Replay(ctx, recs)
}

func TestReplayToTopic(t *testing.T) {
	b, cl, topic, src := setup(t, 100)
	r := dlq.NewReader(topic, dlq.WithClientOpts(kgo.SeedBrokers(b.Seeds...)))
	ctx := context.Background()
	// Stops at the second batch: Resume says where to go on.
	var last dlq.Progress
	pr, err := dlq.Replay(ctx, r, dlq.Filter{}, &failing{next: dlq.ToTopic(cl, ""), n: 2}, dlq.ReplayOptions{Batch: 30, Progress: func(p dlq.Progress) { last = p }})
	if err == nil || !strings.Contains(err.Error(), "target down") {
		t.Fatalf("replay: %v", err)
	}
	if !pr.Done || pr.Err == "" || pr.Replayed != 30 || last.Replayed != 30 || !last.Done {
		t.Fatalf("progress after the failure: %+v", pr)
	}
	from := pr.Resume[0]
	if from <= 0 || from > 31 {
		t.Fatalf("resume at %d, want after the first batch", from)
	}
	pr, err = dlq.Replay(ctx, r, dlq.Filter{From: from}, dlq.ToTopic(cl, ""), dlq.ReplayOptions{Batch: 30})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Total != 100-from || pr.Scanned != pr.Total || pr.Skipped != 4-from/25 {
		t.Fatalf("progress: %+v", pr)
	}
	// Every record that is not truncated is in the source topic, at its
	// own partition, with its own headers and the replay header.
	got := map[string]kgo.Record{}
	consume(t, b, src, 96, func(kr *kgo.Record) { got[string(kr.Key)] = *kr })
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		kr, ok := got[k]
		if i%25 == 24 {
			if ok {
				t.Fatalf("truncated dead letter %d replayed", i)
			}
			continue
		}
		if !ok {
			t.Fatalf("record %d not replayed", i)
		}
		if kr.Partition != int32(i%3) || string(kr.Value) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("record %d: partition %d value %s", i, kr.Partition, kr.Value)
		}
		if len(kr.Headers) != 3 || kr.Headers[0].Key != "trace" || string(kr.Headers[1].Value) != fmt.Sprintf("%s/0@%d", topic, i) || string(kr.Headers[2].Value) != "1" {
			t.Fatalf("record %d headers %+v", i, kr.Headers)
		}
	}
	// Nothing was taken from the DLQ.
	es, _, err := r.List(ctx, dlq.Filter{}, 0)
	if err != nil || len(es) != 100 {
		t.Fatalf("DLQ after replay: %d entries, %v", len(es), err)
	}
}

func TestScanAfterRetention(t *testing.T) {
	b, cl, topic, _ := setup(t, 50)
	adm := kadm.NewClient(cl)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 20})
	if _, err := adm.DeleteRecords(context.Background(), os); err != nil {
		t.Fatal(err)
	}
	r := dlq.NewReader(topic, dlq.WithClientOpts(kgo.SeedBrokers(b.Seeds...)))
	rs, err := r.Ranges(context.Background(), dlq.Filter{From: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].LogStart != 20 || rs[0].Start != 20 || rs[0].End != 50 {
		t.Fatalf("ranges: %+v", rs)
	}
	es, _, err := r.List(context.Background(), dlq.Filter{}, 0)
	if err != nil || len(es) != 30 || es[0].Offset != 20 {
		t.Fatalf("list after retention: %d, %v", len(es), err)
	}
}

// TestScanUnreachable: a broker that goes away during a scan ends it with
// an error naming the partition and offset, within the idle timeout. It
// stops the broker, so it runs on an in-process kfake of its own in every
// pass (the real broker is shared by the whole suite).
func TestScanUnreachable(t *testing.T) {
	t.Setenv("STREAMD_TEST_KAFKA_BROKERS", "")
	b, _, topic, _ := setup(t, 10)
	r := dlq.NewReader(topic, dlq.WithClientOpts(kgo.SeedBrokers(b.Seeds...)), dlq.WithIdleTimeout(3*time.Second))
	rs, err := r.Ranges(context.Background(), dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	rs[0].End = 20 // as if 10 more were written, then the broker stopped
	b.Cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = r.Scan(ctx, rs, dlq.Filter{}, func(*dlq.Entry) error { return nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "partition 0: stopped at offset") {
		t.Fatalf("scan: %v", err)
	}
}

func consume(t *testing.T, b *testenv.Broker, topic string, n int, fn func(*kgo.Record)) {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d from %s", got, n, topic)
		}
		fs.EachRecord(func(kr *kgo.Record) { got++; fn(kr) })
	}
}
