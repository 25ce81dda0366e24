package fuel_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/runtime/internal/fuel"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// TestDataMerged: merging data segments leaves the memory a module starts
// with byte for byte the same, and merges only when that is safe.
func TestDataMerged(t *testing.T) {
	goPlugin, _ := filepath.Abs(filepath.Join("..", "..", "..", "examples", "wasm", "go", "orders-downgrade", "plugin.wasm"))
	for _, tc := range []struct {
		name     string
		bin      func(testing.TB) []byte
		segments int // in the instrumented module; -1: as many as before
	}{
		{"data.wat", func(tb testing.TB) []byte { return watModule(tb, "data") }, 4},
		{"data_passive.wat", func(tb testing.TB) []byte { return watModule(tb, "data_passive") }, -1},
		{"go orders-downgrade", func(tb testing.TB) []byte {
			b, err := os.ReadFile(goPlugin)
			if err != nil {
				testenv.Missing(tb, goPlugin+" (run make examples)")
			}
			return b
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := tc.bin(t)
			out, err := fuel.Instrument(bin, "streamd", "$fuel", 100)
			if err != nil {
				t.Fatal(err)
			}
			before, after := dataSegments(t, bin), dataSegments(t, out)
			switch {
			case tc.segments == -1 && after != before,
				tc.segments > 0 && after != tc.segments,
				tc.segments == 0 && after*100 > before:
				t.Errorf("%d segments became %d", before, after)
			}
			if a, b := initialMemory(t, bin), initialMemory(t, out); !bytes.Equal(a, b) {
				t.Errorf("initial memory differs (%d vs %d bytes)", len(a), len(b))
			}
		})
	}
}

// initialMemory instantiates bin (running no start or init function) and
// returns a copy of its memory.
func initialMemory(t *testing.T, bin []byte) []byte {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer testenv.Close(t, ctx, rt)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	noop := api.GoFunc(func(context.Context, []uint64) {})
	i32 := api.ValueTypeI32
	_, err := rt.NewHostModuleBuilder("streamd").
		NewFunctionBuilder().WithGoFunction(noop, []api.ValueType{i32, i32}, nil).Export("reply").
		NewFunctionBuilder().WithGoFunction(noop, []api.ValueType{i32, i32, i32}, nil).Export("log").
		NewFunctionBuilder().WithGoFunction(api.GoFunc(func(_ context.Context, s []uint64) { s[0] = 100 }), nil, []api.ValueType{i32}).Export("$fuel").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := mod.Memory().Read(0, mod.Memory().Size())
	return bytes.Clone(mem)
}

// dataSegments returns the count of the module's data section.
func dataSegments(t *testing.T, bin []byte) int {
	for i := 8; i < len(bin); {
		id := bin[i]
		size, n := uleb(bin[i+1:])
		body := bin[i+1+n : i+1+n+int(size)]
		if id == 11 {
			c, _ := uleb(body)
			return int(c)
		}
		i += 1 + n + int(size)
	}
	return 0
}
