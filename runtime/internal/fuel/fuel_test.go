package fuel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/runtime/internal/fuel"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

var errStop = errors.New("stop")

// env instantiates the host functions the test module and the
// instrumentation need; refills counts the fuel refills and stop, once
// refills reaches it, makes the refill stop the guest.
type env struct {
	refills, stop int
}

func (e *env) runtime(tb testing.TB) wazero.Runtime {
	tb.Helper()
	ctx := context.Background()
	// Tail calls too: the instrumentation must handle them (TestHostile),
	// though streamd's runtime does not enable them. wazero's own checks
	// stop a guest whose call's context ends (with an error that is not
	// errStop): a test of a rewrite that misses a check fails instead of
	// hanging.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesTailCall).
		WithCloseOnContextDone(true))
	testenv.CloseAtEnd(tb, rt)
	_, err := rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithFunc(func(a, b uint32) uint32 { return a + b }).Export("add").
		Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = rt.NewHostModuleBuilder("streamd").
		NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
		e.refills++
		if e.stop > 0 && e.refills >= e.stop {
			panic(errStop)
		}
		stack[0] = 100
	}), nil, []api.ValueType{api.ValueTypeI32}).Export("$fuel").
		Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return rt
}

func watModule(tb testing.TB, name string) []byte {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), name+".wasm")
	testenv.Wat2Wasm(tb, filepath.Join("testdata", name+".wat"), out, "--debug-names", "--enable-tail-call")
	bin, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

func instantiate(tb testing.TB, e *env, bin []byte) api.Module {
	tb.Helper()
	ctx := context.Background()
	out, err := fuel.Instrument(bin, "streamd", "$fuel", 100)
	if err != nil {
		tb.Fatal(err)
	}
	rt := e.runtime(tb)
	mod, err := rt.InstantiateWithConfig(ctx, out, wazero.NewModuleConfig().WithName("guest"))
	if err != nil {
		tb.Fatal(err)
	}
	return mod
}

// TestSemanticsKept runs the instrumented module's functions and checks
// results and how often the fuel ran out: every 100 units, a unit being
// a function entry or loop iteration of up to 64 bytes of code, and a
// call of an import one more.
func TestSemanticsKept(t *testing.T) {
	bin := watModule(t, "loops")
	ctx := deadline(t)
	for _, tc := range []struct {
		fn      string
		args    []uint64
		want    uint64
		refills int
	}{
		// count(n): 1 entry + n+1 loop heads, each paying 2 units
		// (the loop calls the import add).
		{"count", []uint64{0}, 0, 0},
		{"count", []uint64{48}, 48, 0}, // 99 units
		{"count", []uint64{49}, 49, 1}, // 101 units: the check that takes it to 0 refills
		{"count", []uint64{1000}, 1000, 20},
		// fib(n) makes fib(n+1)*2-1 calls: fib(15)=610 -> 1973 entries.
		{"fib", []uint64{15}, 610, 19},
		{"indirect", []uint64{0, 250}, 250, 5}, // 1 + 1 + 251*2 units
		{"indirect", []uint64{1, 10}, 55, 1},   // 1 + 177 entries
		{"bump", nil, 1, 0},
	} {
		e := &env{}
		mod := instantiate(t, e, bin)
		res, err := callWithin(ctx, mod, "loops.wat "+tc.fn+fmt.Sprint(tc.args), tc.fn, tc.args...)
		if err != nil {
			t.Fatalf("%s%v: %v", tc.fn, tc.args, err)
		}
		if res[0] != tc.want || e.refills != tc.refills {
			t.Errorf("%s%v = %d with %d refills, want %d with %d", tc.fn, tc.args, res[0], e.refills, tc.want, tc.refills)
		}
	}
}

// TestLeafEntriesFree: a function that calls nothing has no check at its
// entry (it cannot recurse; its callers' checks bound how often it runs),
// so calling one costs no fuel; one that calls still pays at entry, and a
// leaf's loop still stops (TestStops, spin).
func TestLeafEntriesFree(t *testing.T) {
	bin := watModule(t, "loops")
	e := &env{}
	mod := instantiate(t, e, bin)
	ctx := deadline(t)
	for range 1000 {
		if _, err := callWithin(ctx, mod, "loops.wat bump", "bump"); err != nil {
			t.Fatal(err)
		}
	}
	if e.refills != 0 {
		t.Fatalf("1000 calls of a leaf function took %d refills, want 0 (one per 100 checks was 10)", e.refills)
	}
	for range 1000 {
		if _, err := callWithin(ctx, mod, "loops.wat indirect(1, 1)", "indirect", 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	// indirect(1, 1) = fib(1): 2 entries, both calling functions' or
	// fib's own (fib calls itself).
	if e.refills != 20 {
		t.Fatalf("1000 calls of indirect(1, 1) took %d refills, want 20", e.refills)
	}
}

// TestStops shows that a refill that panics stops code that never returns,
// with and without loops.
func TestStops(t *testing.T) {
	bin := watModule(t, "loops")
	ctx := deadline(t)
	for _, tc := range []struct {
		fn   string
		args []uint64
	}{
		{"spin", nil},
		{"fib", []uint64{60}}, // would take centuries
	} {
		e := &env{stop: 3}
		mod := instantiate(t, e, bin)
		_, err := callWithin(ctx, mod, "loops.wat "+tc.fn+fmt.Sprint(tc.args), tc.fn, tc.args...)
		if errors.Is(err, errNotStopped) {
			t.Fatal(err)
		}
		if !errors.Is(err, errStop) || e.refills != 3 {
			t.Errorf("%s: err %v after %d refills, want errStop after 3", tc.fn, err, e.refills)
		}
	}
}

// TestHostile runs guests that never return (loops that call, calls
// through a table, a br_table back edge, mutual recursion, tail calls),
// which the refill must stop, and guests whose fuel must be counted exactly
// across calls that leave every way a function can (end, return, br_if and
// br_table to the function's label, return_call, a trap): fuel is checked
// every 100 function entries or loop iterations, so each case's refills
// are its checks / 100.
func TestHostile(t *testing.T) {
	bin := watModule(t, "hostile")
	ctx := deadline(t)
	for _, tc := range []struct {
		fn      string
		args    []uint64
		stop    int    // the refill that stops the guest; 0: none
		refills int    // refills when the call ends
		trap    string // the error's text, for a trap
	}{
		{fn: "spin_calls_leaf", stop: 3, refills: 3},
		{fn: "spin_calls_looper", stop: 3, refills: 3},
		{fn: "spin_calls_indirect", stop: 3, refills: 3},
		{fn: "spin_br_table", stop: 3, refills: 3},
		{fn: "mutual", stop: 3, refills: 3},
		{fn: "tail", stop: 3, refills: 3},
		{fn: "tail_mutual", stop: 3, refills: 3},
		// 1 + k*(2 + 4n + 3) units, 1 + 2k of them in calls itself (its
		// loop pays for its 65 to 128 bytes of code and its callees).
		{fn: "calls", args: []uint64{100, 3}, refills: 17},
		{fn: "calls", args: []uint64{10, 30}, refills: 12},
		{fn: "calls", args: []uint64{10, 1}, refills: 0},
		{fn: "calls", args: []uint64{1000, 3}, stop: 100, refills: 100},
		// 1 + 100*(1+10) checks.
		{fn: "calls_tail", args: []uint64{100}, refills: 11},
		{fn: "tail_count", args: []uint64{999}, refills: 10},
		{fn: "trap_after", args: []uint64{250}, refills: 2, trap: "unreachable"},
	} {
		name := tc.fn + fmt.Sprint(tc.args)
		e := &env{stop: tc.stop}
		mod := instantiate(t, e, bin)
		_, err := callWithin(ctx, mod, "hostile.wat "+name, tc.fn, tc.args...)
		if errors.Is(err, errNotStopped) {
			t.Fatal(err)
		}
		switch {
		case tc.stop > 0 && !errors.Is(err, errStop):
			t.Errorf("%s: err %v, want errStop", name, err)
		case tc.trap != "" && (err == nil || !contains(err.Error(), tc.trap)):
			t.Errorf("%s: err %v, want a trap (%s)", name, err, tc.trap)
		case tc.stop == 0 && tc.trap == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		}
		if e.refills != tc.refills {
			t.Errorf("%s: %d refills, want %d", name, e.refills, tc.refills)
		}
	}
}

// hostileDeadline bounds each test that runs guests: some never return
// unless the instrumentation stops them, and a wrong rewrite can make any
// loop endless. Right, every call ends in milliseconds; a missing check
// fails the test within seconds, naming the guest, not at go test's
// -timeout.
const hostileDeadline = 10 * time.Second

// stuckGrace is how long a call may go on past its test's deadline before
// it is given up on: wazero's own checks (env.runtime) stop a loop when the
// context ends, but not recursion or tail calls, which would run on.
const stuckGrace = 2 * time.Second

// errNotStopped: a guest ran until its test's deadline.
var errNotStopped = errors.New("not stopped by the fuel refill (a check is missing?)")

// deadline returns the context for a test's guest calls, which ends
// hostileDeadline from now.
func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hostileDeadline)
	t.Cleanup(cancel)
	return ctx
}

// callWithin calls fn (guest names the module and function in messages)
// under ctx (deadline) and returns its results. A call still running at
// ctx's end returns errNotStopped, whether wazero's check then stops it or
// it is still running stuckGrace later (it is then left running).
func callWithin(ctx context.Context, mod api.Module, guest, fn string, args ...uint64) ([]uint64, error) {
	f := mod.ExportedFunction(fn)
	if f == nil {
		return nil, fmt.Errorf("%s: no export %q", guest, fn)
	}
	type result struct {
		res []uint64
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := f.Call(ctx, args...)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		if ctx.Err() == nil {
			return r.res, r.err
		}
		return nil, fmt.Errorf("%s: %w: it ran until the test's %v deadline (then: %v)", guest, errNotStopped, hostileDeadline, r.err)
	case <-ctx.Done():
	}
	select {
	case r := <-done:
		return nil, fmt.Errorf("%s: %w: it ran until the test's %v deadline (then: %v)", guest, errNotStopped, hostileDeadline, r.err)
	case <-time.After(stuckGrace):
		return nil, fmt.Errorf("%s: %w: still running %v after the test's %v deadline (left running)", guest, errNotStopped, stuckGrace, hostileDeadline)
	}
}

// TestNamesKept checks that a trap's stack trace still names the guest's
// functions after renumbering.
func TestNamesKept(t *testing.T) {
	e := &env{stop: 1}
	mod := instantiate(t, e, watModule(t, "loops"))
	_, err := callWithin(deadline(t), mod, "loops.wat fib[60]", "fib", 60)
	if errors.Is(err, errNotStopped) || err == nil || !contains(err.Error(), ".fib(i32) i32") {
		t.Fatalf("err %v, want a stack trace naming fib", err)
	}
}

// TestNamesWhenUnnamed: in a module without a name section, a trap's stack
// trace names functions by their export name, or by their index in the
// module as given, not by the index the rewrite moved them to.
func TestNamesWhenUnnamed(t *testing.T) {
	out := filepath.Join(t.TempDir(), "unnamed.wasm")
	testenv.Wat2Wasm(t, filepath.Join("testdata", "unnamed.wat"), out)
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	mod := instantiate(t, &env{}, bin)
	_, err = callWithin(deadline(t), mod, "unnamed.wat outer", "outer")
	if errors.Is(err, errNotStopped) || err == nil || !contains(err.Error(), "\t.$0()\n") || !contains(err.Error(), "\t.outer()") {
		t.Fatalf("err %v, want a stack trace with .$0() and .outer()", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestRefused(t *testing.T) {
	bin := watModule(t, "loops")
	for _, tc := range []struct {
		name string
		bin  []byte
		fuel uint32
		want string
	}{
		{"not wasm", []byte("hello world"), 100, "not a WebAssembly module"},
		{"version 2", append([]byte("\x00asm\x02\x00\x00\x00"), bin[8:]...), 100, "binary format version"},
		{"zero fuel", bin, 0, "fuel 0"},
		{"truncated", bin[:len(bin)-3], 100, "past the end"},
		{"unknown section", append(append([]byte{}, bin...), 0x42, 0x00), 100, "section id 66"},
	} {
		_, err := fuel.Instrument(tc.bin, "streamd", "$fuel", tc.fuel)
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// The module must not already import the refill function.
	out, err := fuel.Instrument(bin, "streamd", "$fuel", 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fuel.Instrument(out, "streamd", "$fuel", 100); err == nil || !contains(err.Error(), "already imports streamd.$fuel") {
		t.Errorf("instrumenting twice: %v", err)
	}
}

// TestPlugins instruments every example plugin that `make examples` built
// (Go, C, Rust, AssemblyScript) and checks wazero accepts the result.
func TestPlugins(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "..", "examples", "wasm", "*", "*", "plugin.wasm"))
	if len(paths) == 0 {
		testenv.Missing(t, "examples/wasm/*/*/plugin.wasm (run make examples)")
	}
	ctx := context.Background()
	// The interpreter validates exactly as the compiler does, in a fraction
	// of the time (runtime's own tests run the instrumented plugins).
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer testenv.Close(t, ctx, rt)
	for _, p := range paths {
		bin, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out, err := fuel.Instrument(bin, "streamd", "$fuel", 10000)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if _, err := rt.CompileModule(ctx, out); err != nil {
			t.Errorf("%s: instrumented module does not compile: %v", p, err)
		}
	}
}

// TestEntryChecks: a function that calls, but is on no cycle of calls, calls
// no import and nothing indirectly, and whose callees' code is small, goes
// without an entry check (Version 5), so chain() costs no fuel; a function
// that calls the host is checked; a cycle of three functions without loops
// and a chain of 2^40 calls without loops are still stopped by the refill.
func TestEntryChecks(t *testing.T) {
	bin := watModule(t, "chains")
	ctx := deadline(t)
	for _, tc := range []struct {
		fn      string
		calls   int // how many times fn is called
		stop    int
		refills int
	}{
		{fn: "chain", calls: 1000, refills: 0},
		{fn: "host", calls: 1000, refills: 20}, // 2 units a call: it calls an import
		{fn: "cycle", calls: 1, stop: 3, refills: 3},
		{fn: "double", calls: 1, stop: 3, refills: 3},
	} {
		e := &env{stop: tc.stop}
		mod := instantiate(t, e, bin)
		for range tc.calls {
			_, err := callWithin(ctx, mod, "chains.wat "+tc.fn, tc.fn)
			if errors.Is(err, errNotStopped) {
				t.Fatal(err)
			}
			if (tc.stop > 0) != errors.Is(err, errStop) || (tc.stop == 0 && err != nil) {
				t.Fatalf("%s: err %v (stop %d)", tc.fn, err, tc.stop)
			}
		}
		if e.refills != tc.refills {
			t.Errorf("%s: %d calls took %d refills, want %d", tc.fn, tc.calls, e.refills, tc.refills)
		}
	}
}
