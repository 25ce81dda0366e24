package kafka_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/generate"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/record"
)

// BenchmarkPassthrough compares, on one in-process kfake broker, a streamd
// pipeline with no transform against a bare franz-go consume-and-produce
// loop. Each op is one 200-byte record moved from a 4-partition input
// topic (filled before the timer starts) to an output topic; records/s is
// reported, with the CPU time per record (user+system, broker included),
// which stays comparable on a busy machine, and the produce shape: records
// per partition batch and per produce request. Run both with the same
// -benchtime=Nx and compare with benchstat:
//
//	go test ./pipeline/kafka -run '^$' -bench Passthrough -benchtime 300000x -count 1
//
// Both write the output with the same compression (STREAMD_BENCH_COMPRESSION,
// default none; franz-go's own default would be snappy for the bare loop).
func BenchmarkPassthrough(b *testing.B) {
	for _, mode := range []string{"bare-franz-go", "streamd"} {
		b.Run(mode, func(b *testing.B) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(4), kfake.AllowAutoTopicCreation())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			seeds := c.ListenAddrs()
			for _, t := range []string{"in", "out"} {
				if err := c.CreateTopic(t, 4, nil); err != nil {
					b.Fatal(err)
				}
			}
			fill(b, seeds, "in", b.N)
			b.ResetTimer()
			cpu0 := cpuTime()
			start := time.Now()
			var pc produceCount
			switch mode {
			case "bare-franz-go":
				bare(b, seeds, b.N, &pc)
			default:
				viaPipeline(b, seeds, b.N, &pc)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/record")
			if n := pc.batches.Load(); n > 0 {
				b.ReportMetric(float64(pc.records.Load())/float64(n), "records/produce-batch")
				b.ReportMetric(float64(b.N)/float64(pc.requests.Load()), "records/produce-request")
			}
		})
	}
}

// produceCount counts what a producer wrote: partition batches and the
// records in them, and produce requests, so that the two modes' produce
// shapes can be compared.
type produceCount struct{ batches, records, requests atomic.Int64 }

func (c *produceCount) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	c.batches.Add(1)
	c.records.Add(int64(m.NumRecords))
}

func (c *produceCount) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil { // Produce
		c.requests.Add(1)
	}
}

// benchCompression is the output compression of both modes
// (STREAMD_BENCH_COMPRESSION, default none), so they do the same work.
func benchCompression() string {
	if c := os.Getenv("STREAMD_BENCH_COMPRESSION"); c != "" {
		return c
	}
	return "none"
}

// cpuTime is the process's user+system CPU time in ns (broker included:
// it runs in-process for both modes).
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err) // RUSAGE_SELF with a valid pointer does not fail
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func fill(b *testing.B, seeds []string, topic string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var failed atomic.Value
	for i := 0; i < n; i++ {
		k, v := generate.Order(int64(i), 1000)
		v = append(v, fmt.Sprintf(`,"pad":"%0*d"`, max(0, 200-len(v)-10), 0)...)
		cl.Produce(context.Background(), &kgo.Record{Key: k, Value: v[:200]}, func(_ *kgo.Record, err error) {
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

// bare is the baseline: one consumer-group client polls, produces every
// record asynchronously (linger 5 ms) and commits what was produced.
func bare(b *testing.B, seeds []string, n int, pc *produceCount) {
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("bare"), kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	codec, err := kafka.Compression(benchCompression(), 0)
	if err != nil {
		b.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(codec), kgo.WithHooks(pc))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	var done atomic.Int64
	ctx := context.Background()
	for done.Load() < int64(n) {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			prod.Produce(ctx, &kgo.Record{Topic: "out", Key: r.Key, Value: r.Value, Headers: r.Headers}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				done.Add(1)
			})
		})
		if fs.NumRecords() > 0 {
			if err := prod.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			if err := cons.CommitUncommittedOffsets(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// countSink wraps the Kafka sink, keeping its asynchronous write path
// (pipeline.AsyncSink: several batches in flight per worker, as `streamd
// run` writes), and cancels when n records were written.
type countSink struct {
	*kafka.Sink
	n, want int64
	cancel  context.CancelFunc
}

func (c *countSink) WriteAsync(ctx context.Context, batch []record.Record, done func([]error, error)) {
	c.Sink.WriteAsync(ctx, batch, func(errs []error, err error) {
		if err == nil && atomic.AddInt64(&c.n, int64(len(batch))) >= c.want {
			c.cancel()
		}
		done(errs, err)
	})
}

// WriteMsgsAsync is WriteAsync for the pipeline's no-stage path.
func (c *countSink) WriteMsgsAsync(ctx context.Context, msgs []pipeline.Msg, done func([]error, error)) {
	c.Sink.WriteMsgsAsync(ctx, msgs, func(errs []error, err error) {
		if err == nil && atomic.AddInt64(&c.n, int64(len(msgs))) >= c.want {
			c.cancel()
		}
		done(errs, err)
	})
}

// viaPipeline runs what `streamd run` runs for a kafka -> kafka pipeline
// with no transform and the default batch and worker settings.
func viaPipeline(b *testing.B, seeds []string, n int, pc *produceCount) {
	src, err := kafka.NewSource(kafka.SourceConfig{Seeds: seeds, Topics: []string{"in"}, Group: "streamd", Partitions: 4})
	if err != nil {
		b.Fatal(err)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: seeds, Topic: "out", Partitions: 4, Compression: benchCompression(),
		Opts: []kgo.Opt{kgo.WithHooks(pc)}})
	if err != nil {
		b.Fatal(err)
	}
	defer testenv.Close(b, context.Background(), sink)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := &countSink{Sink: sink, want: int64(n), cancel: cancel}
	p := pipeline.New("bench", src, cs)
	if err := p.Run(ctx); err != nil {
		b.Fatal(err)
	}
	if got := atomic.LoadInt64(&cs.n); got < int64(n) {
		b.Fatalf("wrote %d of %d", got, n)
	}
}

// BenchmarkSinkWrite is the Kafka sink alone, as a pipeline with a stage
// writes: batches of 1,024 records of 200 bytes, each with one header (as
// the orders downgrade's output has), up to 8 batches in flight, to an
// in-process kfake broker. Each op is one record; B/op and allocs/op
// include the broker's.
//
//	go test ./pipeline/kafka -run '^$' -bench SinkWrite -benchtime 200000x -benchmem
func BenchmarkSinkWrite(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "out"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: c.ListenAddrs(), Topic: "out", Partitions: 4, Compression: benchCompression()})
	if err != nil {
		b.Fatal(err)
	}
	defer testenv.Close(b, context.Background(), sink)
	const batch = 1024
	recs := make([]record.Record, batch)
	for i := range recs {
		k, v := generate.Order(int64(i), 1000)
		v = append(v, fmt.Sprintf(`,"pad":"%0*d"`, max(0, 200-len(v)-10), 0)...)
		recs[i] = record.Record{Key: k, Value: v[:200], Headers: []record.Header{{Key: "fluid-schema-version", Value: []byte("1")}}, Timestamp: time.Now()}
	}
	ctx := context.Background()
	slots := make(chan struct{}, 8)
	var failed atomic.Value
	b.ReportAllocs()
	b.ResetTimer()
	for left := b.N; left > 0; left -= batch {
		slots <- struct{}{}
		sink.WriteAsync(ctx, recs[:min(left, batch)], func(errs []error, err error) {
			for _, e := range errs {
				if e != nil {
					failed.Store(e)
				}
			}
			if err != nil {
				failed.Store(err)
			}
			<-slots
		})
	}
	for range cap(slots) {
		slots <- struct{}{}
	}
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}
