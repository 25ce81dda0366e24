package fuel_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/runtime/internal/fuel"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// BenchmarkCheckCost is what stopping guest code costs in a tight Go loop
// (testdata/gosum: the bytes of a 4 KiB buffer summed, ns/byte): the same
// loop natively, in Wasm with no checks (a trusted plugin), instrumented
// with fuel (streamd's default) and with wazero's own
// WithCloseOnContextDone checks (the fallback).
//
//	go test ./runtime/internal/fuel -run '^$' -bench CheckCost
func BenchmarkCheckCost(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "gosum.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", bin, ".")
	cmd.Dir = filepath.Join("testdata", "gosum")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	plain, err := os.ReadFile(bin)
	if err != nil {
		b.Fatal(err)
	}
	fueled, err := fuel.Instrument(plain, "streamd", "$fuel", 10_000)
	if err != nil {
		b.Fatal(err)
	}
	const size = 4096
	b.Run("native-go", func(b *testing.B) {
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		var t uint32
		for b.Loop() {
			for _, c := range buf { // the loop of testdata/gosum
				t += uint32(c)
			}
		}
		sink = t
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/byte")
	})
	for _, tc := range []struct {
		name         string
		bin          []byte
		wazeroChecks bool
	}{
		{"wasm-no-checks", plain, false},
		{"wasm-fuel", fueled, false},
		{"wasm-wazero-checks", plain, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(tc.wazeroChecks))
			defer testenv.Close(b, ctx, rt)
			wasi_snapshot_preview1.MustInstantiate(ctx, rt)
			_, err := rt.NewHostModuleBuilder("streamd").NewFunctionBuilder().
				WithGoFunction(api.GoFunc(func(_ context.Context, s []uint64) { s[0] = 10_000 }), nil, []api.ValueType{api.ValueTypeI32}).
				Export("$fuel").Instantiate(ctx)
			if err != nil {
				b.Fatal(err)
			}
			mod, err := rt.InstantiateWithConfig(ctx, tc.bin, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
			if err != nil {
				b.Fatal(err)
			}
			sum := mod.ExportedFunction("sum")
			for b.Loop() {
				if _, err := sum.Call(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/byte")
		})
	}
}

var sink uint32
