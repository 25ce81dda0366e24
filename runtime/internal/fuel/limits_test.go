package fuel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/runtime/internal/fuel"
)

// watText builds the WAT text src (with --no-check when invalid is set).
func watText(tb testing.TB, src string, invalid bool) []byte {
	tb.Helper()
	dir := tb.TempDir()
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	var extra []string
	if invalid {
		extra = append(extra, "--no-check")
	}
	testenv.Wat2Wasm(tb, in, out, extra...)
	bin, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// TestRefusedIndices: a module that names an index it does not declare is
// refused before anything is rewritten, with the function and the
// instruction's offset, whatever kind of index it is: the rewrite adds a
// type, a function and globals after the module's own, which such an index
// would reach.
func TestRefusedIndices(t *testing.T) {
	for _, tc := range []struct {
		name, decls, body, want string
	}{
		{"global.set past the end", `(global (mut i32) (i32.const 0))`, `(global.set 1 (i32.const 7))`, "global.set 1: the module declares 1 globals"},
		{"global.get past the end", ``, `(drop (global.get 0))`, "global.get 0: the module declares 0 globals"},
		{"call_indirect of the added type", `(table 1 funcref)`, `(call_indirect (type 1) (i32.const 0))`, "call_indirect of type 1: the module declares 1 types"},
		{"call past the end", ``, `(call 1)`, "call 1: the module declares 1 functions"},
		{"table.grow of no table", ``, `(drop (table.grow 0 (ref.null func) (i32.const 1)))`, "table.grow of table 0: the module declares 0 tables"},
		{"table.init of no segment", `(table 1 funcref)`, `(table.init 0 0 (i32.const 0) (i32.const 0) (i32.const 0))`, "table.init of element segment 0: the module declares 0 element segments"},
		{"local past the end", ``, `(local.set 0 (i32.const 1))`, "local.set 0: the function has 0 locals"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := watText(t, fmt.Sprintf(`(module %s (func (export "f") %s))`, tc.decls, tc.body), true)
			_, err := fuel.Rewrite(bin, fuel.Options{Module: "streamd", Name: "$fuel", Fuel: 100})
			var ie *fuel.InvalidError
			if !errors.Is(err, fuel.ErrInvalid) || !errors.As(err, &ie) {
				t.Fatalf("err %v, want an *InvalidError", err)
			}
			if ie.Func != 0 || ie.Name != "f" || ie.Offset == 0 || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "function 0 (f), instruction at offset 0x") {
				t.Fatalf("err %v (%+v), want function 0 (f), its offset and %q", err, ie, tc.want)
			}
		})
	}
	// Outside code: an export of the added global, a start function past
	// the end.
	for src, want := range map[string]string{
		`(module (global i32 (i32.const 0)) (export "g" (global 1)))`: `export "g" of global 1: the module declares 1 globals`,
		`(module (func) (start 1))`:                                   `start function 1: the module declares 1 functions`,
	} {
		_, err := fuel.Rewrite(watText(t, src, true), fuel.Options{Module: "streamd", Name: "$fuel", Fuel: 100})
		if !errors.Is(err, fuel.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", src, err, want)
		}
	}
}

// TestTableLimits: a table's maximum is capped, so that table.grow past
// the cap returns -1; one that starts above the cap is refused.
func TestTableLimits(t *testing.T) {
	src := `(module
  (table $t 10 funcref)
  (func (export "grow") (param i32) (result i32) (table.grow $t (ref.null func) (local.get 0))))`
	bin := watText(t, src, false)
	out, err := fuel.Rewrite(bin, fuel.Options{Module: "streamd", Name: "$fuel", Fuel: 100, MaxTableElements: 100, TableRequest: "req"})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{}
	rt := e.runtime(t)
	ctx := context.Background()
	mod, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ grow, want, req uint64 }{{90, 10, 0}, {1, 0xffffffff, 101}, {1000, 0xffffffff, 1100}} {
		res, err := mod.ExportedFunction("grow").Call(ctx, tc.grow)
		if err != nil || res[0] != tc.want {
			t.Fatalf("table.grow %d: %v, %v, want %d", tc.grow, res, err, tc.want)
		}
		if req := mod.ExportedGlobal("req").Get(); req != tc.req {
			t.Fatalf("table.grow %d: the refused size recorded is %d, want %d", tc.grow, req, tc.req)
		}
	}
	for _, f := range []func() ([]byte, error){
		func() ([]byte, error) {
			return fuel.Rewrite(bin, fuel.Options{Module: "streamd", Name: "$fuel", Fuel: 100, MaxTableElements: 9})
		},
		func() ([]byte, error) { return fuel.LimitTables(bin, 9) },
	} {
		var tle *fuel.TableLimitError
		if _, err := f(); !errors.As(err, &tle) || tle.Min != 10 || tle.Limit != 9 {
			t.Errorf("a table of 10 under a cap of 9: %v", err)
		}
	}
}

// TestWorkCharged: the fuel pays for work, not for loop heads: a bulk
// instruction costs one unit per 64 bytes, straight-line code one per 64
// bytes of code, with a site inside long code.
func TestWorkCharged(t *testing.T) {
	long := strings.Repeat("(global.set $g (i32.add (global.get $g) (i32.const 1)))\n", 6000) // 42,000 bytes of code
	src := `(module
  (memory 16)
  (global $g (mut i32) (i32.const 0))
  (func (export "fill") (param i32) (memory.fill (i32.const 0) (i32.const 1) (local.get 0)))
  (func (export "copy") (param i32) (memory.copy (i32.const 1) (i32.const 0) (local.get 0)))
  (func (export "long") ` + long + `))`
	e := &env{}
	bin := watText(t, src, false)
	ctx := deadline(t)
	for _, tc := range []struct {
		fn      string
		args    []uint64
		refills int
	}{
		{"fill", []uint64{64 * 99}, 0},
		{"fill", []uint64{64 * 100}, 1}, // 100 units: the fuel of 100 runs out
		// One instruction that overdraws the fuel refills once: the host
		// looks before it runs.
		{"fill", []uint64{64 * 1000}, 1},
		{"copy", []uint64{64 * 100}, 1},
		// 42,000 bytes of code, 657 units, paid at 6 sites 8 KiB apart:
		// each of the first five overdraws the fuel of 100 (one site at the
		// entry would refill once).
		{"long", nil, 5},
	} {
		e.refills = 0
		mod := instantiate(t, e, bin) // a fresh fuel
		if _, err := callWithin(ctx, mod, "work.wat "+tc.fn, tc.fn, tc.args...); err != nil {
			t.Fatal(err)
		}
		if e.refills != tc.refills {
			t.Errorf("%s%v: %d refills, want %d", tc.fn, tc.args, e.refills, tc.refills)
		}
	}
}

// TestTooComplex: functions whose compile time would be unbounded (blocks
// nested deeper than MaxDepth, more br_table targets than
// MaxBrTableTargets) are refused.
func TestTooComplex(t *testing.T) {
	deep := strings.Repeat("(block ", fuel.MaxDepth+1) + strings.Repeat(")", fuel.MaxDepth+1)
	wide := "(block (br_table " + strings.Repeat("0 ", fuel.MaxBrTableTargets) + "0 (i32.const 0)))"
	for name, body := range map[string]string{"deep": deep, "wide": wide} {
		bin := watText(t, `(module (func (export "f") `+body+`))`, false)
		if _, err := fuel.Rewrite(bin, fuel.Options{Module: "streamd", Name: "$fuel", Fuel: 100}); !errors.Is(err, fuel.ErrTooComplex) {
			t.Errorf("%s: err %v, want ErrTooComplex", name, err)
		}
	}
}
