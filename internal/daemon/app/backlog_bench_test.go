package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline/generate"
)

// BenchmarkOldBacklog: a backlog of old records
// (CreateTime 2020) moved kafka -> Wasm downgrade (the Go example, built
// by its build.sh) -> kafka by a pipeline built from TOML as `streamd run`
// builds it, against the same backlog with fresh timestamps. Each op is
// one ~200-byte v2 order already in a 4-partition topic when the timer
// starts; the op ends when the output topic holds all of them, which the
// benchmark checks (every record delivered, none twice). records/s leaves
// out the pipeline's start (the first tenth of the records), as
// BenchmarkKafkaWasmKafka does. A backlog that is not delivered within
// 10 minutes fails the run (without the sink's fix the old one never was:
// every batch timed out before it was sent).
//
// STREAMD_BENCH_LOG=FILE appends the pipeline's log to FILE.
//
// Interleave rounds of the two, on a real broker (STREAMD_BENCH_BROKERS;
// default an in-process kfake), and compare with benchstat:
//
//	go test -c -o /tmp/app.test ./internal/daemon/app && cd internal/daemon/app
//	for i in 1 2 3 4 5; do
//	  STREAMD_BENCH_BROKERS=127.0.0.1:22092 /tmp/app.test -test.run '^$' -test.bench OldBacklog -test.benchtime 1000000x
//	done | tee /tmp/backlog.txt
//	benchstat -col /ts /tmp/backlog.txt
func BenchmarkOldBacklog(b *testing.B) {
	plugin := exampleDowngrade(b)
	for _, tc := range []struct {
		name string
		ts   func(i int) time.Time
	}{
		{"fresh", nil},
		{"2020", func(i int) time.Time {
			return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
		}},
	} {
		b.Run("ts="+tc.name, func(b *testing.B) {
			seeds, topic := benchBrokers(b)
			in, out := topic+"-in", topic+"-out"
			adm := kadm.NewClient(newClient(b, seeds))
			// Unlimited retention: time-based retention (7 days by
			// default) counts from the records' timestamps, so a broker
			// deletes a 2020 backlog (and its copy) as it is read.
			unlimited := "-1"
			if _, err := adm.CreateTopics(context.Background(), 4, 1, map[string]*string{"retention.ms": &unlimited}, in, out); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if _, err := adm.DeleteTopics(context.Background(), in, out); err != nil {
					b.Errorf("delete topics: %v", err)
				}
			})
			fillOrdersAt(b, seeds, in, b.N, tc.ts)
			cfg := benchConfig(b, seeds, in, out, plugin)
			a, err := app.Build(context.Background(), cfg, benchLogger(b), benchOpen, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			defer testenv.Close(b, context.Background(), a)
			deadline := time.Now().Add(10 * time.Minute)
			var late atomic.Bool
			b.ResetTimer()
			moved, took, cpu := runUntil(b, a, int64(b.N), 2*time.Millisecond, func(ctx context.Context) (int64, error) {
				if time.Now().After(deadline) {
					late.Store(true)
					return int64(b.N), nil // stop; failed below
				}
				ends, err := adm.ListEndOffsets(ctx, out)
				var n int64
				ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
				return n, err
			})
			b.StopTimer()
			if late.Load() {
				b.Fatalf("the backlog (ts=%s) was not delivered within 10 minutes", tc.name)
			}
			ends, err := adm.ListEndOffsets(context.Background(), out)
			if err != nil {
				b.Fatal(err)
			}
			var n int64
			ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
			if n != int64(b.N) {
				b.Fatalf("the output holds %d records for %d in", n, b.N)
			}
			b.ReportMetric(float64(moved)/took.Seconds(), "records/s")
			b.ReportMetric(float64(cpu)/float64(moved), "cpu-ns/record")
		})
	}
}

// fillOrdersAt is fillOrders with record i's timestamp ts(i) (nil: now).
func fillOrdersAt(b *testing.B, seeds []string, topic string, n int, ts func(int) time.Time) {
	cl := newClient(b, seeds, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100000))
	var failed atomic.Value
	for i := 0; i < n; i++ {
		k, v := generate.Order(int64(i), 1000)
		v = v[:len(v)-1]
		v = append(v, fmt.Sprintf(`,"note":"%0*d"}`, max(1, 200-len(v)-12), 0)...)
		r := &kgo.Record{Key: k, Value: v}
		if ts != nil {
			r.Timestamp = ts(i)
		}
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
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

// exampleDowngrade builds examples/wasm/go/orders-downgrade with its
// build.sh and returns its plugin.wasm.
func exampleDowngrade(b *testing.B) string {
	dir, _ := filepath.Abs(filepath.Join("..", "..", "..", "examples", "wasm", "go", "orders-downgrade"))
	if out, err := exec.Command("sh", filepath.Join(dir, "build.sh")).CombinedOutput(); err != nil {
		b.Fatalf("build.sh: %v\n%s", err, out)
	}
	p := filepath.Join(dir, "plugin.wasm")
	if _, err := os.Stat(p); err != nil {
		b.Fatal(err)
	}
	return p
}

// benchLogger logs to STREAMD_BENCH_LOG, or nowhere.
func benchLogger(b *testing.B) *slog.Logger {
	path := os.Getenv("STREAMD_BENCH_LOG")
	if path == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	testenv.Cleanup(b, f.Close)
	return slog.New(slog.NewTextHandler(f, nil))
}
