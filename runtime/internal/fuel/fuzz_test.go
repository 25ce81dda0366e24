package fuel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/runtime/internal/fuel"
	"github.com/tetratelabs/wazero"
)

// FuzzInstrument feeds Rewrite arbitrary bytes: it must not panic;
// whenever wazero accepts a module Rewrite rewrote, wazero must accept the
// rewrite too; and whenever wazero refuses a module, Rewrite must refuse it
// or wazero its rewrite: the rewrite never makes an invalid module valid
// (one that names the fuel global, one past its own, say).
func FuzzInstrument(f *testing.F) {
	f.Add(watModule(f, "loops"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	// global.set 1 in a module with one global: the fuel counter's index.
	f.Add(watText(f, `(module (global (mut i32) (i32.const 0)) (func (export "f") (loop (global.set 1 (i32.const 9)) (br 0))))`, true))
	f.Add(watText(f, `(module (table 1 funcref) (func (export "f") (call_indirect (type 1) (i32.const 0))))`, true))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, bin []byte) {
		out, err := fuel.Rewrite(bin, fuel.Options{Module: "streamd", Name: "$fuel", Fuel: 100, MaxTableElements: 1 << 20, TableRequest: "streamd.$table_request"})
		if err != nil {
			// Malformed or unsupported: nothing to compare. (wazero is not
			// asked about such inputs: a huge declared count makes it
			// allocate gigabytes before it notices the bytes are missing.)
			return
		}
		if !plausible(bin) {
			return
		}
		// A runtime per input: compiled code would otherwise pile up.
		rt := wazero.NewRuntime(ctx)
		defer testenv.Close(t, ctx, rt)
		origErr, outErr := compile(ctx, rt, bin), compile(ctx, rt, out)
		switch {
		case origErr == nil && outErr != nil:
			t.Fatalf("wazero accepts the module but rejects its instrumented copy: %v", outErr)
		case origErr != nil && outErr == nil && !strings.Contains(origErr.Error(), "custom"):
			// (Custom sections are not code: the rewrite drops a name
			// section that does not parse, and wazero v1.12 refuses an
			// empty custom section at the end of a module, which the
			// rewrite follows with sections of its own.)
			t.Fatalf("wazero refuses the module (%v) but accepts its instrumented copy", origErr)
		}
	})
}

// compile compiles bin, turning a panic of wazero's (some malformed inputs
// cause one in wazero v1.12's validator) into an error.
func compile(ctx context.Context, rt wazero.Runtime, bin []byte) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("wazero panicked: %v", v)
		}
	}()
	_, err = rt.CompileModule(ctx, bin)
	return err
}

// plausible reports whether every non-custom section's leading count is at
// most its size in bytes (each entry takes at least one). wazero v1.12
// allocates for the declared count first, so a fuzzed count of billions
// would exhaust memory in wazero, not test Instrument.
func plausible(bin []byte) bool {
	i := 8
	for i < len(bin) {
		id := bin[i]
		size, n := uleb(bin[i+1:])
		if n == 0 || size > uint64(len(bin)-i-1-n) {
			return false
		}
		body := bin[i+1+n : i+1+n+int(size)]
		if id != 0 && id != 8 {
			if count, m := uleb(body); m == 0 || count > uint64(len(body)) {
				return false
			}
		}
		i += 1 + n + int(size)
	}
	return true
}

func uleb(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}
