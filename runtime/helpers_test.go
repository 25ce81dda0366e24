package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
)

// wat builds examples/wasm/wat/NAME.wat into a temp dir and returns the path.
func wat(tb testing.TB, name string) string {
	tb.Helper()
	return watFile(tb, filepath.Join("..", "examples", "wasm", "wat", name+".wat"))
}

// watFile builds the WAT file at path into a temp dir and returns the path.
func watFile(tb testing.TB, path string) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), strings.TrimSuffix(filepath.Base(path), ".wat")+".wasm")
	testenv.Wat2Wasm(tb, path, out)
	return out
}

// tmpRoot holds the plugins built for the tests of this binary.
var tmpRoot string

func TestMain(m *testing.M) { testenv.Main(m, &tmpRoot) }

// goPlugin builds the Go plugin in examples/wasm/go/DIR once per test binary.
func goPlugin(tb testing.TB, dir string) string { return testenv.ExampleGoWasm(tb, dir) }

func newHost(tb testing.TB) *runtime.Host {
	tb.Helper()
	h, err := runtime.NewHost(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	testenv.CloseAtEnd(tb, h)
	return h
}

func load(tb testing.TB, path string, opts plugins.Options) *runtime.Module {
	tb.Helper()
	if opts.Wasm.CacheDir == "" {
		opts.Wasm.CacheDir = filepath.Join(tmpRoot, "cache")
	}
	if testenv.Race && opts.Wasm.CompileTimeout == 0 {
		// A Go guest of a few MB takes over a minute to compile under
		// the race detector on a loaded machine; the compile timeout is
		// checked in the passes without it.
		opts.Wasm.CompileTimeout = 10 * time.Minute
	}
	m, err := newHost(tb).Load(context.Background(), path, opts)
	if err != nil {
		tb.Fatal(err)
	}
	testenv.CloseAtEnd(tb, m)
	return m
}

// recs makes n records with the given values.
func recs(values ...string) []record.Record {
	out := make([]record.Record, len(values))
	for i, v := range values {
		out[i] = record.Record{
			Key:       []byte(fmt.Sprintf("k%d", i)),
			Value:     []byte(v),
			Headers:   []record.Header{{Key: "h", Value: []byte("x")}},
			Timestamp: time.UnixMilli(1767225600000 + int64(i)).UTC(),
			Partition: 3,
			Offset:    int64(100 + i),
		}
	}
	return out
}

// benchRecords makes n records of about 200 bytes.
func benchRecords(n int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		out[i] = record.Record{
			Key:       []byte(fmt.Sprintf("key-%012d", i)),
			Value:     []byte(fmt.Sprintf(`{"order_id":"o-%08d","customer":{"id":"c-%06d","name":"Ann Example"},"amount_cents":%d,"currency":"EUR","tags":["a","b","c"],"note":"0123456789abcdef0123456789"}`, i, i%1000, i*7)),
			Headers:   []record.Header{{Key: "trace-id", Value: []byte("0123456789abcdef")}},
			Timestamp: time.UnixMilli(1767225600000 + int64(i)),
			Partition: 0,
			Offset:    int64(i),
		}
	}
	return out
}
