package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
)

// nativeIdentity is the identity transform in plain Go, in process: the
// baseline for the Wasm overhead. Like the host answering KEEP, it returns
// each input record without copying it.
func nativeIdentity(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	res := make([]plugins.Result, len(batch))
	for i := range res {
		res[i].Records = batch[i : i+1 : i+1]
	}
	return res, nil
}

// nativeDowngrade is the orders downgrade in plain Go, in process.
func nativeDowngrade(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	res := make([]plugins.Result, len(batch))
	for i := range batch {
		v, err := downgrade.Value(make([]byte, 0, len(batch[i].Value)), batch[i].Value)
		if err != nil {
			res[i].Err = err
			continue
		}
		out := batch[i]
		out.Value = v
		out.Headers = append(out.Headers[:len(out.Headers):len(out.Headers)], record.Header{Key: downgrade.SchemaHeader, Value: []byte("1")})
		res[i].Records = []record.Record{out}
	}
	return res, nil
}

type transformFunc func(context.Context, []record.Record) ([]plugins.Result, error)

func benchTransform(b *testing.B, f transformFunc, batch int) {
	recs := benchRecords(batch)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(200 * batch))
	cpu := cpuTime()
	for b.Loop() {
		res, err := f(ctx, recs)
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != batch || res[0].Err != nil {
			b.Fatalf("results %+v", res[0])
		}
	}
	perRecord := float64(b.Elapsed().Nanoseconds()) / float64(b.N*batch)
	b.ReportMetric(perRecord, "ns/record")
	b.ReportMetric(1e9/perRecord, "records/s")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*batch), "cpu-ns/record")
}

func moduleFunc(m *runtime.Module) transformFunc {
	return func(ctx context.Context, recs []record.Record) ([]plugins.Result, error) {
		return m.Call(ctx, runtime.OpTransform, recs)
	}
}

// cancelable calls f with a context that can be cancelled, as a pipeline
// does, instead of the benchmark's context.Background().
func cancelable(f transformFunc) transformFunc {
	ctx, cancel := context.WithCancel(context.Background())
	_ = cancel // never cancelled; the context lives as long as the benchmark
	return func(_ context.Context, recs []record.Record) ([]plugins.Result, error) {
		return f(ctx, recs)
	}
}

// BenchmarkIdentity compares the cost of an identity transform per record:
// WAT guests answering KEEP (the toy of docs/abi.md, one loop iteration per
// record, and testdata/identity_unrolled.wat, which checks the request and
// walks 16 records per loop iteration), the Go SDK guest copying every
// record back, and plain Go in process. The difference to native is the
// ABI overhead.
func BenchmarkIdentity(b *testing.B) {
	watKeep := load(b, wat(b, "identity"), plugins.Options{Pool: 1})
	watUnrolled := load(b, watFile(b, filepath.Join("testdata", "identity_unrolled.wat")), plugins.Options{Pool: 1})
	goCopy := load(b, goPlugin(b, "identity"), plugins.Options{Pool: 1})
	for _, batch := range []int{256, 1} {
		for _, impl := range []struct {
			name string
			f    transformFunc
		}{
			{"native-go", nativeIdentity},
			{"wasm-wat-keep", moduleFunc(watKeep)},
			{"wasm-wat-keep-unrolled", moduleFunc(watUnrolled)},
			{"wasm-wat-keep-unrolled-cancelable", cancelable(moduleFunc(watUnrolled))},
			{"wasm-go-sdk-copy", moduleFunc(goCopy)},
		} {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, impl.name), func(b *testing.B) {
				benchTransform(b, impl.f, batch)
			})
		}
	}
}

// BenchmarkDowngrade measures orders-downgrade throughput: the Go Wasm
// plugin against the same Go code in process, and the Rust, C and
// AssemblyScript plugins when `make examples` has built them.
func BenchmarkDowngrade(b *testing.B) {
	b.Run("batch=256/native-go", func(b *testing.B) { benchTransform(b, nativeDowngrade, 256) })
	// "trusted" is Timeout -1: compiled without termination checks.
	for _, trusted := range []bool{false, true} {
		opts := plugins.Options{Pool: 1}
		suffix := ""
		if trusted {
			opts.Timeout, suffix = -1, "-trusted"
		}
		m := load(b, goPlugin(b, "orders-downgrade"), opts)
		b.Run("batch=256/wasm-go-sdk"+suffix, func(b *testing.B) { benchTransform(b, moduleFunc(m), 256) })
		for _, lang := range []string{"rust", "c", "assemblyscript"} {
			path := filepath.Join("..", "examples", "wasm", lang, "orders-downgrade", "plugin.wasm")
			var m *runtime.Module
			if _, err := os.Stat(path); err == nil {
				m = load(b, path, opts)
			}
			b.Run("batch=256/wasm-"+lang+suffix, func(b *testing.B) {
				if m == nil {
					testenv.Missing(b, path+" (run make examples)")
				}
				benchTransform(b, moduleFunc(m), 256)
			})
		}
	}
}

// BenchmarkLoad measures a pipeline start's plugin part up to its first
// output record: loading the orders-downgrade plugin (compile,
// instantiate, manifest, init) and transforming one record, in Go, C, Rust
// and AssemblyScript (the last three when `make examples` has built them),
// with an empty (cold) and a filled (warm) compilation cache. The targets:
// Go's warm load <= 50 ms; <= 1 s cold and <= 0.3 s warm for C, Rust and
// AssemblyScript.
func BenchmarkLoad(b *testing.B) {
	h := newHost(b)
	ctx := context.Background()
	first := benchRecords(1)
	// loadOnce loads the plugin and transforms one record: a pipeline's
	// start up to its first output record, the plugin's part.
	loadOnce := func(b *testing.B, path, cache string) {
		m, err := h.Load(ctx, path, plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{CacheDir: cache}})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := m.Call(ctx, runtime.OpTransform, first); err != nil || len(res) != 1 || res[0].Err != nil {
			b.Fatalf("first record: %v %+v", err, res)
		}
		testenv.Close(b, ctx, m)
	}
	goPath := goPlugin(b, "orders-downgrade")
	for _, lang := range []string{"go", "c", "rust", "assemblyscript"} {
		path := goPath
		if lang != "go" {
			path = filepath.Join("..", "examples", "wasm", lang, "orders-downgrade", "plugin.wasm")
		}
		b.Run(lang+"/cache=cold", func(b *testing.B) {
			if _, err := os.Stat(path); err != nil {
				testenv.Missing(b, path+" (run make examples)")
			}
			dir := b.TempDir()
			i := 0
			for b.Loop() {
				i++
				loadOnce(b, path, filepath.Join(dir, fmt.Sprint(i)))
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/load")
		})
		b.Run(lang+"/cache=warm", func(b *testing.B) {
			if _, err := os.Stat(path); err != nil {
				testenv.Missing(b, path+" (run make examples)")
			}
			dir := b.TempDir()
			loadOnce(b, path, dir)
			start := time.Now()
			for b.Loop() {
				loadOnce(b, path, dir)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/load")
		})
	}
}

// BenchmarkPlugins measures the Wasm plugins named by STREAMD_BENCH_PLUGINS,
// a space-separated list of LABEL=PATH, as transforms of batches of 256
// orders (benchRecords), each loaded twice: as a pipeline loads it (fuel,
// the default timeout) and trusted (timeout -1: no fuel). It is for
// comparing builds of one plugin side by side in one run, e.g. before and
// after wasm-opt (docs/benchmarks.md):
//
//	STREAMD_BENCH_PLUGINS="c=a.wasm c-opt=b.wasm" go test ./runtime -run '^$' -bench Plugins -count 6
func BenchmarkPlugins(b *testing.B) {
	list := strings.Fields(os.Getenv("STREAMD_BENCH_PLUGINS"))
	if len(list) == 0 {
		b.Skip("set STREAMD_BENCH_PLUGINS to LABEL=PATH ...")
	}
	for _, item := range list {
		label, path, ok := strings.Cut(item, "=")
		if !ok {
			b.Fatalf("STREAMD_BENCH_PLUGINS: %q is not LABEL=PATH", item)
		}
		for _, trusted := range []bool{false, true} {
			opts, name := plugins.Options{Pool: 1}, label
			if trusted {
				opts.Timeout, name = -1, label+"-trusted"
			}
			m := load(b, path, opts)
			b.Run(name, func(b *testing.B) { benchTransform(b, moduleFunc(m), 256) })
		}
	}
}
