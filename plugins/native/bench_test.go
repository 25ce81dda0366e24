package native

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
	"github.com/streamd/streamd/record"
)

// inProcessIdentity is the identity transform as a plain Go value: the
// baseline with no plugin boundary at all.
type inProcessIdentity struct{}

func (inProcessIdentity) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i := range batch {
		out[i].Records = []record.Record{batch[i]}
	}
	return out, nil
}

// benchBatch is 256 records with 200-byte values (docs/benchmarks.md).
func benchBatch() []record.Record {
	batch := make([]record.Record, 256)
	for i := range batch {
		batch[i] = record.Record{
			Value:     bytes.Repeat([]byte{'a' + byte(i%26)}, 200),
			Timestamp: time.UnixMilli(1767225600000 + int64(i)),
			Partition: 0,
			Offset:    int64(i),
		}
	}
	return batch
}

func runIdentity(b *testing.B, t plugins.Transformer) {
	batch := benchBatch()
	ctx := context.Background()
	b.SetBytes(int64(len(batch) * 200))
	b.ResetTimer()
	for b.Loop() {
		res, err := t.Transform(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != len(batch) || len(res[255].Records) != 1 || len(res[255].Records[0].Value) != 200 {
			b.Fatalf("identity returned %d results", len(res))
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "records/s")
}

// wasmPlugin returns a built Wasm example, building the Go one if needed.
func wasmPlugin(b *testing.B, dir string) string {
	path := filepath.Join("../../examples/wasm", dir, "plugin.wasm")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if dir != "go/identity" {
		testenv.Missing(b, path+" (make examples)")
	}
	if out, err := exec.Command("bash", filepath.Join("../../examples/wasm", dir, "build.sh")).CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v\n%s", dir, err, out)
	}
	return path
}

// BenchmarkIdentity compares one identity transform call of a 256-record
// batch of 200-byte records: in-process, native plugin, Wasm plugin.
func BenchmarkIdentity(b *testing.B) {
	ctx := context.Background()
	b.Run("in-process", func(b *testing.B) { runIdentity(b, inProcessIdentity{}) })
	for _, c := range []struct {
		name string
		cfg  map[string]any
	}{{"native-go-copy", map[string]any{"copy": true}}, {"native-go-keep", nil}} {
		b.Run(c.name, func(b *testing.B) {
			p, err := Open(ctx, buildPlugin(b, "examples/native/go/identity"), plugins.Options{Config: c.cfg})
			if err != nil {
				b.Fatal(err)
			}
			defer testenv.Close(b, ctx, p)
			runIdentity(b, p.(plugins.Transformer))
		})
	}
	for _, dir := range []string{"go/identity", "rust/identity", "c/identity"} {
		b.Run("wasm-"+filepath.Dir(dir), func(b *testing.B) {
			p, err := wasm.Open(ctx, wasmPlugin(b, dir), plugins.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer testenv.Close(b, ctx, p)
			runIdentity(b, p.(plugins.Transformer))
		})
	}
}
