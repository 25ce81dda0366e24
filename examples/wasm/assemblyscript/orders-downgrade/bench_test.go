package ordersdowngrade_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
	"github.com/streamd/streamd/record"
)

// benchRecords are orders like runtime's benchmarks use (~200 bytes each).
func benchRecords(n int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		out[i] = record.Record{
			Key:       []byte(fmt.Sprintf("key-%012d", i)),
			Value:     []byte(fmt.Sprintf(`{"order_id":"o-%08d","customer":{"id":"c-%06d","name":"Ann Example"},"amount_cents":%d,"currency":"EUR","tags":["a","b","c"],"note":"0123456789abcdef0123456789"}`, i, i%1000, i*7)),
			Headers:   []record.Header{{Key: "trace-id", Value: []byte("0123456789abcdef")}},
			Timestamp: time.UnixMilli(1767225600000 + int64(i)),
			Offset:    int64(i),
		}
	}
	return out
}

type transformFunc func(context.Context, []record.Record) ([]plugins.Result, error)

func nativeDowngrade(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	res := make([]plugins.Result, len(batch))
	for i := range batch {
		r, err := reference(batch[i])
		res[i] = plugins.Result{Records: []record.Record{r}, Err: err}
	}
	return res, nil
}

func nativeIdentity(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	res := make([]plugins.Result, len(batch))
	for i := range res {
		res[i].Records = batch[i : i+1 : i+1]
	}
	return res, nil
}

func openFunc(b *testing.B, path string) transformFunc {
	ctx := context.Background()
	p, err := wasm.Open(ctx, path, plugins.Options{Kind: plugins.KindTransform, Pool: 1})
	if err != nil {
		b.Fatalf("open %s: %v", path, err)
	}
	b.Cleanup(func() { _ = p.Close(ctx) })
	return p.(plugins.Transformer).Transform
}

func bench(b *testing.B, f transformFunc, batch int) {
	recs := benchRecords(batch)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(200 * batch))
	for b.Loop() {
		res, err := f(ctx, recs)
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != batch || res[0].Err != nil {
			b.Fatalf("results %+v", res[0])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
}

// others are the same plugins in other languages, compared when their
// owners' build.sh has been run (they are not built from here).
var others = map[string]string{
	"wasm-go-sdk": "../../go/%s/plugin.wasm",
	"wasm-c":      "../../c/%s/plugin.wasm",
}

func run(b *testing.B, example string, native transformFunc, batches []int) {
	impls := []struct {
		name string
		f    transformFunc
	}{
		{"native-go", native},
		{"wasm-as", openFunc(b, pluginPath(b, "../"+example))},
	}
	for name, pattern := range others {
		if p := fmt.Sprintf(pattern, example); fileExists(p) {
			impls = append(impls, struct {
				name string
				f    transformFunc
			}{name, openFunc(b, p)})
		}
	}
	for _, batch := range batches {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, impl.name), func(b *testing.B) { bench(b, impl.f, batch) })
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// BenchmarkDowngrade compares orders-downgrade per record: the Go reference
// in process, the AssemblyScript plugin, and the Go/C plugins when built.
func BenchmarkDowngrade(b *testing.B) {
	run(b, "orders-downgrade", nativeDowngrade, []int{256})
}

// BenchmarkIdentity compares the identity transform (KEEP) per record.
func BenchmarkIdentity(b *testing.B) {
	run(b, "identity", nativeIdentity, []int{256, 1})
}
