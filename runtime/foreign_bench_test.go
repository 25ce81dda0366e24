package runtime_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
)

// BenchmarkIdentityABIs: an identity transform in each ABI streamd runs,
// side by side in one run, at the call a pipeline's stage makes (Call,
// batches of 256 records of ~200 bytes, one instance): streamd's own ABI
// (the Rust SDK's identity, when `make examples` has built it, and the Go
// SDK's), Redpanda's (the Rust and Go SDKs' identity examples, which read
// each record and write it back), and Fluvio's (the README's filter
// SmartModule, which keeps every one of these records, each containing an
// "a": Fluvio's SDK has no identity example), with plain Go in process as
// the floor. docs/benchmarks.md has the figures.
func BenchmarkIdentityABIs(b *testing.B) {
	// A timeout long enough for a count under valgrind (a Go guest's
	// start takes seconds there; the fuel checks are those of any
	// timeout), and STREAMD_BENCH_CACHE, a compile cache kept between
	// runs, so that such a count compiles nothing.
	opts := plugins.Options{Pool: 1, Timeout: time.Minute,
		Wasm: plugins.WasmOptions{CacheDir: os.Getenv("STREAMD_BENCH_CACHE"), CompileTimeout: 10 * time.Minute}}
	rustV1 := filepath.Join("..", "examples", "wasm", "rust", "identity", "plugin.wasm")
	mods := []struct {
		name string
		path func() string
	}{
		{"streamd-v1-rust-sdk", func() string {
			if _, err := os.Stat(rustV1); err != nil {
				testenv.Missing(b, rustV1+" (run make examples)")
			}
			return rustV1
		}},
		{"streamd-v1-go-sdk", func() string { return goPlugin(b, "identity") }},
		{"redpanda-rust-sdk", func() string { return testenv.ForeignWasm(b, "redpanda/rust", "identity") }},
		{"redpanda-go-sdk", func() string { return testenv.ForeignWasm(b, "redpanda/go", "identity") }},
		{"fluvio-filter-keeps-all", func() string { return testenv.ForeignWasm(b, "fluvio", "filter") }},
	}
	b.Run("batch=256/native-go", func(b *testing.B) { benchTransform(b, nativeIdentity, 256) })
	for _, m := range mods {
		b.Run("batch=256/"+m.name, func(b *testing.B) {
			mod := load(b, m.path(), opts)
			benchTransform(b, moduleFunc(mod), 256)
		})
	}
}
