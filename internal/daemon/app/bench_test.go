package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline/generate"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/load"
	"github.com/streamd/streamd/record"
)

// BenchmarkKafkaWasmKafka:
// records/s of a kafka -> transform -> kafka pipeline, built from TOML
// exactly as `streamd run` builds it, with no transform and with the
// orders-downgrade Wasm plugin in Go, C, Rust and AssemblyScript (the last
// three when `make examples` built them), the same Go code called in
// process (a reference no plugin can beat), and a bare franz-go loop
// (benchBare) measured the same way; each run on a fresh in-process kfake
// broker (or the brokers in STREAMD_BENCH_BROKERS), the output compressed
// with STREAMD_BENCH_COMPRESSION (default none). scripts/bench-e2e runs
// the rows in interleaved rounds. Each op is one ~200-byte
// v2 order moved from a 4-partition topic, filled before the timer starts,
// to an output topic; the op ends when the output topic holds them all.
// records/s and cpu-ns/record leave out the pipeline's start (the first
// tenth of the records).
//
//	go test ./internal/daemon/app -run '^$' -bench KafkaWasmKafka -benchtime 200000x -count 6
//
// Compare the transform rows with transform=none (benchstat -col
// /transform); cpu-ns/record is the process's CPU per record, broker
// included when it is kfake.
func BenchmarkKafkaWasmKafka(b *testing.B) {
	plugins := map[string]string{}
	for _, tc := range []struct{ name, transform string }{
		{"bare-franz-go", "bare"},
		{"none", ""},
		{"inprocess-go", "inprocess"},
		{"wasm-go", "go"},
		{"wasm-c", "c"},
		{"wasm-rust", "rust"},
		{"wasm-assemblyscript", "assemblyscript"},
	} {
		if tc.transform == "bare" {
			b.Run("transform="+tc.name, benchBare)
			continue
		}
		var path string
		if tc.transform == "inprocess" {
			path = filepath.Join(b.TempDir(), inProcess)
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				b.Fatal(err)
			}
		} else if tc.transform != "" {
			if plugins[tc.transform] == "" {
				plugins[tc.transform] = downgradePlugin(b, tc.transform)
			}
			if path = plugins[tc.transform]; path == "-" {
				continue
			}
		}
		b.Run("transform="+tc.name, func(b *testing.B) {
			seeds, topic := benchBrokers(b)
			in, out := topic+"-in", topic+"-out"
			adm := kadm.NewClient(newClient(b, seeds))
			if _, err := adm.CreateTopics(context.Background(), 4, 1, nil, in, out); err != nil {
				b.Fatal(err)
			}
			fillOrders(b, seeds, in, b.N)
			cfg := benchConfig(b, seeds, in, out, path)
			a, err := app.Build(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), benchOpen, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			defer testenv.Close(b, context.Background(), a)
			b.ResetTimer()
			moved, took, cpu := runUntil(b, a, int64(b.N), 2*time.Millisecond, func(ctx context.Context) (int64, error) {
				ends, err := adm.ListEndOffsets(ctx, out)
				var n int64
				ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
				return n, err
			})
			b.StopTimer()
			b.ReportMetric(float64(moved)/took.Seconds(), "records/s")
			b.ReportMetric(float64(cpu)/float64(moved), "cpu-ns/record")
			if n := metricSum(b, a, "streamd_batch_duration_seconds"); n > 0 {
				b.ReportMetric(float64(b.N)/n, "records/batch")
			}
		})
	}
}

// benchBrokers returns STREAMD_BENCH_BROKERS, or a fresh in-process kfake
// broker's address, and a topic prefix unique to the run.
func benchBrokers(b *testing.B) ([]string, string) {
	topic := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if s := os.Getenv("STREAMD_BENCH_BROKERS"); s != "" {
		return strings.Split(s, ","), topic
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(4))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c.ListenAddrs(), topic
}

func newClient(b *testing.B, seeds []string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// fillOrders writes n valid v2 orders of ~200 bytes (a note field pads
// them) to topic.
func fillOrders(b *testing.B, seeds []string, topic string, n int) {
	cl := newClient(b, seeds, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	var failed atomic.Value
	for i := 0; i < n; i++ {
		k, v := generate.Order(int64(i), 1000)
		v = v[:len(v)-1]
		v = append(v, fmt.Sprintf(`,"note":"%0*d"}`, max(1, 200-len(v)-12), 0)...)
		cl.Produce(context.Background(), &kgo.Record{Key: k, Value: v}, func(_ *kgo.Record, err error) {
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

// benchConfig is the pipeline's TOML; STREAMD_BENCH_PIPELINE, if set, adds
// its lines to the [[pipeline]] table (e.g. "max_in_flight = 10000"), to
// measure a setting against the defaults.
func benchConfig(b *testing.B, seeds []string, in, out, plugin string) *config.Config {
	src := fmt.Sprintf(`
data_dir = %q
[kafka]
brokers = [%q]
[[pipeline]]
name = "bench"
%s
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
start = "earliest"
`, b.TempDir(), strings.Join(seeds, `","`), os.Getenv("STREAMD_BENCH_PIPELINE"), in, in+"-group")
	if plugin != "" {
		src += fmt.Sprintf(`[[pipeline.transform]]
type = "wasm"
path = %q
`, plugin)
	}
	src += fmt.Sprintf(`[pipeline.sink]
type = "kafka"
topic = %q
compression = %q
[pipeline.errors]
policy = "stop"
`, out, benchCompression())
	cfg, err := config.Parse("bench.toml", []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// benchCompression is STREAMD_BENCH_COMPRESSION (default none): the output
// compression of the pipeline's sink and of the bare loop's producer.
func benchCompression() string {
	if c := os.Getenv("STREAMD_BENCH_COMPRESSION"); c != "" {
		return c
	}
	return "none"
}

// benchBare is the bare loop streamd is measured against: one franz-go
// client consuming the input topic in a group, one producing each record
// to the output topic (acks all, 5 ms linger, benchCompression), a flush
// and a commit per poll; measured like the pipeline rows (runUntil).
func benchBare(b *testing.B) {
	seeds, topic := benchBrokers(b)
	in, out := topic+"-in", topic+"-out"
	adm := kadm.NewClient(newClient(b, seeds))
	if _, err := adm.CreateTopics(context.Background(), 4, 1, nil, in, out); err != nil {
		b.Fatal(err)
	}
	fillOrders(b, seeds, in, b.N)
	codec, err := kgoCompression(benchCompression())
	if err != nil {
		b.Fatal(err)
	}
	cons := newClient(b, seeds, kgo.ConsumerGroup(in+"-group"), kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	prod := newClient(b, seeds, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(codec))
	loop := func(ctx context.Context) error {
		var failed atomic.Value
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				prod.Produce(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: r.Value, Headers: r.Headers}, func(_ *kgo.Record, err error) {
					if err != nil && ctx.Err() == nil {
						failed.Store(err)
					}
				})
			})
			if fs.NumRecords() > 0 {
				if err := prod.Flush(ctx); err != nil && ctx.Err() == nil {
					return err
				}
				if err := cons.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
					return err
				}
			}
			if err, _ := failed.Load().(error); err != nil {
				return err
			}
		}
		return nil
	}
	b.ResetTimer()
	moved, took, cpu := runUntilFunc(b, loop, int64(b.N), 2*time.Millisecond, func(ctx context.Context) (int64, error) {
		ends, err := adm.ListEndOffsets(ctx, out)
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n, err
	})
	b.StopTimer()
	b.ReportMetric(float64(moved)/took.Seconds(), "records/s")
	b.ReportMetric(float64(cpu)/float64(moved), "cpu-ns/record")
}

// kgoCompression is the franz-go codec of a sink compression name.
func kgoCompression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("STREAMD_BENCH_COMPRESSION %q: want none, gzip, snappy, lz4 or zstd", name)
}

// downgradePlugin returns the orders-downgrade plugin in lang: Go is built
// here (GOOS=wasip1); C must have been built by `make examples`.
func downgradePlugin(b testing.TB, lang string) string {
	src := filepath.Join("..", "..", "..", "examples", "wasm", lang, "orders-downgrade")
	if lang != "go" {
		p, _ := filepath.Abs(filepath.Join(src, "plugin.wasm"))
		if _, err := os.Stat(p); err != nil {
			b.Logf("no %s (run make examples)", p)
			return "-"
		}
		return p
	}
	out := filepath.Join(b.TempDir(), "plugin.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, msg)
	}
	return out
}

// cpuTime is the process's user+system CPU time in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err) // RUSAGE_SELF with a valid pointer does not fail
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// runUntil runs a until count (polled every interval) reaches total,
// then stops it. It returns the progress from when count passed a tenth
// of total (the pipeline has started, joined its group and is in its
// stride) to the end: how much moved, in how long, and the process's CPU
// time meanwhile in ns.
func runUntil(b *testing.B, a *app.App, total int64, every time.Duration, count func(context.Context) (int64, error)) (moved int64, took time.Duration, cpu int64) {
	return runUntilFunc(b, a.Run, total, every, count)
}

// runUntilFunc is runUntil for any run function that returns when its
// context is cancelled. Over the same stretch it also reports the Go
// runtime's own account of the process (runtime/metrics, broker included):
// alloc-B/record and allocs/record, what was allocated on the heap (robust
// to load), and gc-cpu-ns/record, the runtime's estimate of the CPU time
// its garbage collector took (it counts a mark worker's wall time, so it
// is inflated on a loaded machine). With STREAMD_BENCH_HEAPPROFILE=PATH it
// writes the heap profile (as of the last GC) to PATH.1 ... PATH.4 at 20,
// 40, 60 and 80% of the records.
func runUntilFunc(b *testing.B, run func(context.Context) error, total int64, every time.Duration, count func(context.Context) (int64, error)) (moved int64, took time.Duration, cpu int64) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		last       int64
		t0, tEnd   time.Time
		c0, n0     int64
		rt0, rt    goStats
		heaps      int64 // heap profiles written
		done       = make(chan struct{})
		startAfter = total / 10
	)
	go func() {
		defer close(done)
		defer cancel()
		for ctx.Err() == nil {
			n, err := count(ctx)
			if err == nil {
				last = n
				if t0.IsZero() && n >= startAfter {
					t0, c0, n0, rt0 = time.Now(), cpuTime(), n, readGoStats()
				}
				if hp := os.Getenv("STREAMD_BENCH_HEAPPROFILE"); hp != "" && heaps < 4 && n >= total*(2+2*heaps)/10 {
					heaps++
					if f, err := os.Create(fmt.Sprintf("%s.%d", hp, heaps)); err == nil {
						_ = pprof.Lookup("heap").WriteTo(f, 0)
						_ = f.Close()
					}
				}
				if n >= total {
					tEnd, cpu, rt = time.Now(), cpuTime()-c0, readGoStats()
					return
				}
			}
			time.Sleep(every)
		}
	}()
	rss0 := resetPeakRSS()
	if err := run(ctx); err != nil {
		b.Fatal(err)
	}
	<-done
	if tEnd.IsZero() {
		b.Fatalf("reached %d of %d", last, total)
	}
	if peak := peakRSS(); peak > 0 && rss0 > 0 {
		b.ReportMetric(float64(peak), "peak-rss-B") // benchstat shows B in Mi
		b.ReportMetric(float64(peak-rss0), "rss-growth-B")
	}
	if n := float64(last - n0); n > 0 {
		b.ReportMetric((rt.gcCPU-rt0.gcCPU)*1e9/n, "gc-cpu-ns/record")
		b.ReportMetric(float64(rt.allocBytes-rt0.allocBytes)/n, "alloc-B/record")
		b.ReportMetric(float64(rt.allocs-rt0.allocs)/n, "allocs/record")
	}
	return last - n0, tEnd.Sub(t0), cpu
}

// goStats is what runUntilFunc reads of runtime/metrics.
type goStats struct {
	gcCPU              float64 // seconds
	allocBytes, allocs uint64
}

func readGoStats() goStats {
	s := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/allocs:objects"},
	}
	metrics.Read(s)
	var g goStats
	if s[0].Value.Kind() == metrics.KindFloat64 {
		g.gcCPU = s[0].Value.Float64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		g.allocBytes = s[1].Value.Uint64()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		g.allocs = s[2].Value.Uint64()
	}
	return g
}

// resetPeakRSS returns the process's resident set in bytes after a GC
// that gives free memory back to the OS, and resets its peak (VmHWM) to
// it, so that peakRSS reports the peak of what runs next; 0 where /proc
// cannot do that (not Linux).
func resetPeakRSS() int64 {
	goruntime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0
	}
	return procStatus("VmRSS:")
}

// peakRSS is the process's peak resident set (VmHWM) in bytes, 0 when
// unknown.
func peakRSS() int64 { return procStatus("VmHWM:") }

func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// metricSum is the sum of a's metric name: counter values, or histogram
// sample counts.
func metricSum(b *testing.B, a *app.App, name string) float64 {
	n, err := gatherSum(a, name)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// gatherSum is metricSum for any goroutine.
func gatherSum(a *app.App, name string) (float64, error) {
	mfs, err := a.Registry().Gather()
	if err != nil {
		return 0, err
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				n += float64(h.GetSampleCount())
			} else {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n, nil
}

// inProcess is the plugin file name benchOpen answers with the orders
// downgrade as an in-process Go function.
const inProcess = "inprocess-go-downgrade.wasm"

func benchOpen(ctx context.Context, ref string, o plugins.Options) (plugins.Plugin, error) {
	if strings.HasSuffix(ref, "/"+inProcess) {
		return inprocDowngrade{}, nil
	}
	return load.Open(ctx, ref, o)
}

// inprocDowngrade is the orders downgrade as a Go function in process.
type inprocDowngrade struct{}

func (inprocDowngrade) Manifest() plugins.Manifest {
	return plugins.Manifest{Name: "inprocess-downgrade", Kind: plugins.KindTransform, Version: "1", ABI: 1}
}

func (inprocDowngrade) Close(context.Context) error { return nil }

var v1 = []byte("1")

func (inprocDowngrade) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	res := make([]plugins.Result, len(batch))
	outs := make([]record.Record, len(batch))
	var buf []byte
	for i := range batch {
		v, err := downgrade.Value(buf, batch[i].Value)
		if err != nil {
			res[i].Err = err
			continue
		}
		buf = v[len(v):]
		out := batch[i]
		out.Value = v
		out.Headers = append(out.Headers[:len(out.Headers):len(out.Headers)], record.Header{Key: downgrade.SchemaHeader, Value: v1})
		outs[i] = out
		res[i].Records = outs[i : i+1 : i+1]
	}
	return res, nil
}
