package kafka_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
)

// benchSeeds is the broker of the delivery benchmarks: the real one of
// STREAMD_TEST_KAFKA_BROKERS, else an in-process kfake.
func benchSeeds(b *testing.B) []string {
	if s := os.Getenv("STREAMD_TEST_KAFKA_BROKERS"); s != "" {
		return strings.Split(s, ",")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(4), kfake.AllowAutoTopicCreation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c.ListenAddrs()
}

var benchTopicSeq atomic.Int64

func benchTopics(b *testing.B, seeds []string, names ...string) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10) + "-" + strconv.FormatInt(benchTopicSeq.Add(1), 10)
		if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 4, 1, nil, out[i]); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// deliveryPipeline is a kafka -> kafka pipeline with no transform and the
// default batch, worker and transaction settings, at-least-once or
// exactly-once; cs counts what it writes.
func deliveryPipeline(b *testing.B, seeds []string, in, out string, eos bool, cs *countSink) *pipeline.Pipeline {
	var tx *kafka.Transactions
	var opts []kgo.Opt
	if eos {
		tx = &kafka.Transactions{}
		opts = []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}
	}
	src, err := kafka.NewSource(kafka.SourceConfig{Seeds: seeds, Topics: []string{in}, Group: out, Partitions: 4, Transactions: tx, Opts: opts, InstanceID: out})
	if err != nil {
		b.Fatal(err)
	}
	var txSrc *kafka.Source
	if eos {
		txSrc = src
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: seeds, Topic: out, Partitions: 4, Compression: benchCompression(), Transactional: txSrc})
	if err != nil {
		b.Fatal(err)
	}
	testenv.CloseAtEnd(b, sink)
	cs.Sink = sink
	return pipeline.New("bench", src, cs)
}

// BenchmarkDelivery compares exactly-once with at-least-once for the same
// kafka -> kafka pipeline (no transform, default batch, workers and
// transaction size), side by side in one run, on kfake or, with
// STREAMD_TEST_KAFKA_BROKERS, a real broker. throughput/*: each op is one
// 200-byte record moved from a backlog (filled before the timer);
// records/s and CPU per record. latency/*: records produced at 2,000/s
// while the pipeline runs, and a read_committed reader of the output
// measuring each record's time from its produce timestamp to its arrival;
// p50-ms and p99-ms (exactly-once adds up to the transaction interval,
// 100 ms, plus a commit).
//
//	go test ./pipeline/kafka -run '^$' -bench Delivery -benchtime 100000x -count 6 | tee d.txt; benchstat -col /mode d.txt
func BenchmarkDelivery(b *testing.B) {
	for _, what := range []string{"throughput", "latency"} {
		for _, mode := range []string{"at-least-once", "exactly-once"} {
			b.Run(what+"/mode="+mode, func(b *testing.B) {
				seeds := benchSeeds(b)
				t := benchTopics(b, seeds, "in", "out")
				in, out := t[0], t[1]
				eos := mode == "exactly-once"
				if what == "throughput" {
					benchThroughput(b, seeds, in, out, eos)
				} else {
					benchLatency(b, seeds, in, out, eos)
				}
			})
		}
	}
}

func benchThroughput(b *testing.B, seeds []string, in, out string, eos bool) {
	fillTopic(b, seeds, in, b.N)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := &countSink{want: int64(b.N), cancel: cancel}
	p := deliveryPipeline(b, seeds, in, out, eos, cs)
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	if err := p.Run(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if got := atomic.LoadInt64(&cs.n); got < int64(b.N) {
		b.Fatalf("wrote %d of %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/record")
	if s := p.Status(); eos && (s.Transactions == nil || s.Transactions.Committed == 0) {
		b.Fatalf("exactly-once committed no transaction: %+v", s.Transactions)
	}
}

func fillTopic(b *testing.B, seeds []string, topic string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	v := []byte(strings.Repeat("x", 190))
	var failed atomic.Value
	for i := 0; i < n; i++ {
		cl.Produce(context.Background(), &kgo.Record{Key: []byte("k-" + strconv.Itoa(i)), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

func benchLatency(b *testing.B, seeds []string, in, out string, eos bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := &countSink{want: int64(b.N), cancel: func() {}}
	p := deliveryPipeline(b, seeds, in, out, eos, cs)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	reader, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(in), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	// Wait until the pipeline is ready, so that its start is not counted.
	for !p.Ready() {
		time.Sleep(10 * time.Millisecond)
	}
	b.ResetTimer()
	go func() {
		const rate = 2000
		t0 := time.Now()
		for i := 0; i < b.N; i++ {
			if d := time.Until(t0.Add(time.Duration(i) * time.Second / rate)); d > 0 {
				time.Sleep(d)
			}
			prod.Produce(ctx, &kgo.Record{Key: []byte("k-" + strconv.Itoa(i)), Value: []byte("v"), Timestamp: time.Now()}, nil)
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	deadline := time.Now().Add(time.Duration(b.N)*time.Second/2000 + time.Minute)
	for len(lat) < b.N && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := reader.PollFetches(pctx)
		pcancel()
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) { lat = append(lat, now.Sub(r.Timestamp)) })
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if len(lat) < b.N {
		b.Fatalf("read %d of %d records", len(lat), b.N)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}
