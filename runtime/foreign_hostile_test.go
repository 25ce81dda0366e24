package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/runtime"
	"github.com/streamd/streamd/runtime/internal/fuel"
)

// rpHostile is a Redpanda data transform written by hand: a _start that
// checks the ABI, runs setup, then loops over batches, reading each
// record into a buffer at 1024 and running each (by default: write it
// back). Its header fields live at 0..63.
type rpHostile struct {
	name, setup, each, after, decls string
	header                          string // the address of the base offset (default 0)
}

func (h rpHostile) build(t *testing.T) string {
	t.Helper()
	if h.header == "" {
		h.header = "0"
	}
	if h.each == "" {
		h.each = `(drop (call $write (i32.const 1024) (local.get $len)))`
	}
	src := fmt.Sprintf(`(module
  (import "redpanda_transform" "check_abi_version_2" (func $check))
  (import "redpanda_transform" "read_batch_header" (func $header (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "read_next_record" (func $next (param i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "write_record" (func $write (param i32 i32) (result i32)))
  (import "redpanda_transform" "write_record_with_options" (func $write_opts (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  %s
  (func (export "_start") (local $n i32) (local $i i32) (local $len i32)
    (call $check)
    %s
    (loop $batches
      (drop (call $header (i32.const %s) (i32.const 8) (i32.const 12) (i32.const 16) (i32.const 20)
        (i32.const 24) (i32.const 32) (i32.const 40) (i32.const 48) (i32.const 52)))
      (local.set $n (i32.load (i32.const 8)))
      (local.set $i (i32.const 0))
      (block $done (loop $recs
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $len (call $next (i32.const 56) (i32.const 64) (i32.const 72) (i32.const 1024) (i32.const 60000)))
        %s
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $recs)))
      %s
      (br $batches))))
`, h.decls, h.setup, h.header, h.each, h.after)
	dir := t.TempDir()
	file := filepath.Join(dir, h.name+".wat")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, h.name+".wasm")
	testenv.Wat2Wasm(t, file, out)
	return out
}

// TestRedpandaHostile: a Redpanda-ABI guest is held by the same walls as
// a streamd plugin, though it runs its own loop on a goroutine of its own
// and is never called per batch: one that spins in a batch, writes
// records without end, spins before its first batch, returns from its
// main, asks for the next batch without reading this one, or hands the
// host an address outside its memory fails its batch (or its load) with
// the kind and a message that name the cause, within twice its timeout;
// the garbage collector runs while it spins; the instance is replaced and
// the next batch runs; and closing the module ends every goroutine it
// started.
func TestRedpandaHostile(t *testing.T) {
	ok := rpHostile{name: "ok"}.build(t)
	spin := `(loop $spin (br $spin))`
	cases := []struct {
		h     rpHostile
		pages uint32 // max_memory_pages (0: the default)
		load  bool   // fails at load
		kind  error
		msg   string
	}{
		{h: rpHostile{name: "spin", each: spin}, kind: plugins.ErrTimeout, msg: "timed out"},
		{h: rpHostile{name: "spin-after", after: spin}, kind: plugins.ErrTimeout, msg: "timed out"},
		// Writes without end: stopped at the batch's output limit (with
		// 4 pages, 256 KiB and twice the input), or else at its deadline.
		{h: rpHostile{name: "write-forever", each: `(loop $w (drop (call $write (i32.const 1024) (local.get $len))) (br $w))`},
			pages: 4, kind: plugins.ErrMemoryLimit, msg: "more than a batch may write"},
		{h: rpHostile{name: "write-empty-forever", decls: `(data (i32.const 4096) "\01\01\00")`,
			each: `(loop $w (drop (call $write (i32.const 4096) (i32.const 3))) (br $w))`},
			pages: 4, kind: plugins.ErrMemoryLimit, msg: "more than a batch may write"},
		// Writes that fail, without end: each host call looks at the
		// deadline.
		{h: rpHostile{name: "failing-writes-forever", each: `(loop $w (drop (call $write (i32.const 200000) (i32.const 10))) (br $w))`},
			kind: plugins.ErrTimeout, msg: "timed out"},
		{h: rpHostile{name: "spin-setup", setup: spin}, load: true, kind: plugins.ErrTimeout, msg: "timed out"},
		{h: rpHostile{name: "main-returns", setup: `(return)`}, load: true, kind: plugins.ErrTrap, msg: "main returned"},
		{h: rpHostile{name: "skip", each: `(local.set $i (local.get $n))`}, kind: plugins.ErrTrap, msg: "records not read"},
		{h: rpHostile{name: "bad-pointer", header: "200000"}, kind: plugins.ErrTrap, msg: "an address the transform gave is outside its memory"},
		{h: rpHostile{name: "trap", each: `(unreachable)`}, kind: plugins.ErrTrap, msg: "unreachable"},
	}
	for _, c := range cases {
		t.Run(c.h.name, func(t *testing.T) {
			path := c.h.build(t)
			opts := plugins.Options{Pool: 1, Timeout: hostileTimeout, Wasm: plugins.WasmOptions{CacheDir: filepath.Join(tmpRoot, "cache"), MaxMemoryPages: c.pages}}
			before := goruntime.NumGoroutine()
			h := newHost(t)
			start := time.Now()
			m, err := h.Load(context.Background(), path, opts)
			took := time.Since(start)
			if c.load {
				if err == nil || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("load: %v; want a %v that says %q", err, c.kind, c.msg)
				}
				if took > hostileBound+time.Second { // + the compile
					t.Errorf("load took %v", took)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The garbage collector runs while the guest spins or writes.
			gcDone := make(chan time.Duration, 1)
			go func() {
				time.Sleep(hostileTimeout / 5)
				s := time.Now()
				goruntime.GC()
				gcDone <- time.Since(s)
			}()
			start = time.Now()
			_, err = m.Call(context.Background(), runtime.OpTransform, vals("a", "b"))
			took = time.Since(start)
			if err == nil || !errors.Is(err, runtime.ErrBatch) || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("call: %v; want a %v that says %q", err, c.kind, c.msg)
			}
			if took > hostileBound {
				t.Errorf("the call took %v, more than twice its timeout (%v)", took, hostileTimeout)
			}
			if gc := <-gcDone; gc > hostileTimeout {
				t.Errorf("a garbage collection during the call took %v", gc)
			}
			// The module goes on: a new instance takes the next batch
			// (and fails it the same way).
			if _, err := m.Call(context.Background(), runtime.OpTransform, vals("c", "d")); !errors.Is(err, c.kind) {
				t.Errorf("second call: %v", err)
			}
			if err := m.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitGoroutines(t, before)
		})
	}
	t.Run("ok", func(t *testing.T) {
		m := load(t, ok, plugins.Options{Pool: 2, Timeout: hostileTimeout})
		want(t, "the hand-written identity", call(t, m, vals("a", "b")),
			`0: "k0"="a" h:"x" @1767225600000 p3 o100`,
			`1: "k1"="b" h:"x" @1767225600001 p3 o101`)
	})
}

// waitGoroutines waits until no more goroutines run than before.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for goruntime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", goruntime.NumGoroutine(), before, buf[:goruntime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRedpandaOutputs: a record written to a topic the stage has no output
// for is rejected, naming the topic, and what else its input made is
// dropped; the other records of the batch are not.
func TestRedpandaOutputs(t *testing.T) {
	topic := "missing-topic"
	path := rpHostile{name: "unknown-topic",
		decls: fmt.Sprintf(`(data (i32.const 4096) "\01\%02x%s")`, len(topic)*2, topic),
		each: `(drop (call $write (i32.const 1024) (local.get $len)))
		  (if (i32.eq (local.get $i) (i32.const 1))
		    (then (drop (call $write_opts (i32.const 1024) (local.get $len) (i32.const 4096) (i32.const 15)))))`,
	}.build(t)
	m := load(t, path, plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Outputs: []string{"orders"}}})
	res := call(t, m, vals("a", "b", "c"))
	want(t, "unknown topic", res,
		`0: "k0"="a" h:"x" @1767225600000 p3 o100`,
		`1: error: the transform wrote a record to topic "missing-topic", which is not an output of this stage (its outputs: orders)`,
		`2: "k2"="c" h:"x" @1767225600002 p3 o102`)
}

// TestRedpandaCancel: a cancelled call stops a spinning guest at once.
func TestRedpandaCancel(t *testing.T) {
	m := load(t, rpHostile{name: "spin", each: `(loop $spin (br $spin))`}.build(t), plugins.Options{Pool: 1, Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Call(ctx, runtime.OpTransform, vals("a"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("cancelled call took %v", took)
	}
}

// TestForeignLoadErrors: what a module of another host's ABI is refused
// for at load, in words that say what to do.
func TestForeignLoadErrors(t *testing.T) {
	wat := func(name, src string) string {
		dir := t.TempDir()
		file := filepath.Join(dir, name+".wat")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+".wasm")
		testenv.Wat2Wasm(t, file, out)
		return out
	}
	cases := []struct {
		path string
		opts plugins.Options
		msg  string
	}{
		{wat("v1", `(module (import "redpanda_transform" "check_abi_version_1" (func)) (memory (export "memory") 1) (func (export "_start")))`),
			plugins.Options{}, "imports redpanda_transform.check_abi_version_2 (SDKs 1.0 and later), this one check_abi_version_1"},
		{wat("nostart", `(module (import "redpanda_transform" "check_abi_version_2" (func)) (memory (export "memory") 1))`),
			plugins.Options{}, "exports _start (its main), and this one does not"},
		{wat("other-import", `(module (import "redpanda_transform" "check_abi_version_2" (func)) (import "env" "x" (func))
		  (memory (export "memory") 1) (func (export "_start")))`),
			plugins.Options{}, "imports env.x; a Redpanda data transform may import only modules redpanda_schema_registry, redpanda_transform, wasi_snapshot_preview1"},
		{wat("sr", `(module (import "redpanda_transform" "check_abi_version_2" (func))
		  (import "redpanda_schema_registry" "check_abi_version_0" (func))
		  (memory (export "memory") 1) (func (export "_start")))`),
			plugins.Options{}, "imports redpanda_schema_registry, and the stage has no schema registry"},
		{rpHostile{name: "reserved-env"}.build(t), plugins.Options{Config: map[string]any{"REDPANDA_INPUT_TOPIC": "x"}},
			`config key "REDPANDA_INPUT_TOPIC": the REDPANDA_ environment variables are the host's`},
		{rpHostile{name: "nested-env"}.build(t), plugins.Options{Config: map[string]any{"X": map[string]any{}}},
			`config key "X" is an environment variable, whose value must be a string, number or boolean`},
		{rpHostile{name: "codec"}.build(t), plugins.Options{Kind: plugins.KindCodec},
			"is a Redpanda data transform (redpanda data transforms v2), which is a transform, not a codec"},
		{wat("two-kinds", `(module (import "env" "copy_records" (func (param i32 i32))) (memory (export "memory") 1)
		  (func (export "filter") (param i32 i32 i32) (result i32) (i32.const 0))
		  (func (export "map") (param i32 i32 i32) (result i32) (i32.const 0))
		  (func (export "alloc") (param i32) (result i32) (i32.const 0)))`),
			plugins.Options{}, "a Fluvio SmartModule exports one of filter, map, filter_map, array_map, aggregate, this one filter and map"},
		// look_back runs before the first record in Fluvio (it seeds the
		// SmartModule's state from the topic's last records); streamd does
		// not call it, so such a module would run with different results.
		{wat("look-back", `(module (import "env" "copy_records" (func (param i32 i32))) (memory (export "memory") 1)
		  (func (export "filter") (param i32 i32 i32) (result i32) (i32.const 0))
		  (func (export "look_back") (param i32 i32 i32) (result i32) (i32.const 0))
		  (func (export "alloc") (param i32) (result i32) (i32.const 0)))`),
			plugins.Options{}, "exports look_back, which streamd does not call"},
		{wat("no-alloc", `(module (import "env" "copy_records" (func (param i32 i32))) (memory (export "memory") 1)
		  (func (export "filter") (param i32 i32 i32) (result i32) (i32.const 0)))`),
			plugins.Options{}, "a Fluvio SmartModule exports alloc, and this one does not"},
	}
	for _, c := range cases {
		_, err := newHost(t).Load(context.Background(), c.path, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v\nwant it to say: %s", filepath.Base(c.path), err, c.msg)
		}
	}
}

// TestFluvioHostile: a SmartModule is bounded as a streamd plugin is, and
// an output that does not parse, or names records that were not its
// input, fails the batch and says so.
func TestFluvioHostile(t *testing.T) {
	sm := func(name, body string) string {
		src := `(module
  (import "env" "copy_records" (func $copy (param i32 i32)))
  (memory (export "memory") 2)
  (data (i32.const 8192) "\00\00\00\01\10\00\00\0a\00\04hi\00\00")
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "dealloc") (param i32 i32))
  (func (export "map") (param $ptr i32) (param $len i32) (param $v i32) (result i32)
    ` + body + `))`
		dir := t.TempDir()
		file := filepath.Join(dir, name+".wat")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+".wasm")
		testenv.Wat2Wasm(t, file, out)
		return out
	}
	cases := []struct {
		name, body string
		kind       error
		msg        string
	}{
		{"spin", `(loop $spin (br $spin)) (i32.const 0)`, plugins.ErrTimeout, "timed out"},
		{"no-output", `(i32.const 0)`, runtime.ErrBatch, "without handing its output to copy_records"},
		{"garbage", `(call $copy (i32.const 0) (i32.const 100)) (i32.const 0)`, runtime.ErrBatch, "the SmartModule's output"},
		{"status", `(i32.const -22)`, runtime.ErrBatch, "failed to decode its input's records (status -22)"},
		// One record whose offset delta (5) is none of the input's.
		{"stray-delta", `(call $copy (i32.const 8192) (i32.const 14)) (i32.const 1)`, runtime.ErrBatch, "offset delta 5, which is no record of its input"},
		{"outside", `(call $copy (i32.const 0) (i32.const 200000)) (i32.const 0)`, runtime.ErrBatch, "outside guest memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := load(t, sm(c.name, c.body), plugins.Options{Pool: 1, Timeout: hostileTimeout})
			start := time.Now()
			_, err := m.Call(context.Background(), runtime.OpTransform, vals("a"))
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("call: %v; want a %v that says %q", err, c.kind, c.msg)
			}
			if took := time.Since(start); took > hostileBound {
				t.Errorf("the call took %v", took)
			}
		})
	}
}

// TestRedpandaHostileUnfueled: a Redpanda transform the fuel
// instrumentation cannot read runs with wazero's own checks, and its
// spinning batch is stopped all the same, by the call timer closing the
// module, its goroutine then ending.
func TestRedpandaHostileUnfueled(t *testing.T) {
	if inChild(t, "a spinning Redpanda guest without fuel") {
		return
	}
	h := newHost(t)
	runtime.SetRewrite(h, func([]byte, fuel.Options) ([]byte, error) {
		return nil, fmt.Errorf("%w: a test's", fuel.ErrUnsupported)
	})
	before := goruntime.NumGoroutine()
	m, err := h.Load(context.Background(), rpHostile{name: "spin", each: `(loop $spin (br $spin))`}.build(t),
		plugins.Options{Pool: 1, Timeout: hostileTimeout, Wasm: plugins.WasmOptions{CacheDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = callWithin(deadline(t), m, "a spinning Redpanda guest without fuel", vals("a"))
	if errors.Is(err, errNotStopped) || !errors.Is(err, plugins.ErrTimeout) {
		t.Fatalf("call: %v", err)
	}
	if took := time.Since(start); took > hostileBound {
		t.Errorf("the call took %v", took)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, before)
}

// foreignShell builds a module of a foreign ABI around an attack: for
// "redpanda" a transform whose _start runs its batch loop and runs body
// for each record it reads; for "fluvio" a map SmartModule whose map runs
// body. pages is the initial memory (0: 2), decls are added to the
// module, start (when not empty) is the body of its Wasm start function,
// and noCheck builds a module that is invalid as written.
func foreignShell(t *testing.T, abi, name string, pages int, decls, start, body string, noCheck bool) string {
	t.Helper()
	if start != "" {
		decls += "\n(start $attack_start)\n(func $attack_start (local $i i32)\n" + start + ")"
	}
	var src string
	switch abi {
	case "redpanda":
		src = fmt.Sprintf(`(module
  (import "redpanda_transform" "check_abi_version_2" (func $check))
  (import "redpanda_transform" "read_batch_header" (func $header (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "read_next_record" (func $next (param i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "write_record" (func $write (param i32 i32) (result i32)))
  (memory (export "memory") %d)
  %s
  (func (export "_start") (local $n i32) (local $i i32) (local $len i32)
    (call $check)
    (loop $batches
      (drop (call $header (i32.const 0) (i32.const 8) (i32.const 12) (i32.const 16) (i32.const 20)
        (i32.const 24) (i32.const 32) (i32.const 40) (i32.const 48) (i32.const 52)))
      (local.set $n (i32.load (i32.const 8)))
      (local.set $i (i32.const 0))
      (block $done (loop $recs
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $len (call $next (i32.const 56) (i32.const 64) (i32.const 72) (i32.const 1024) (i32.const 60000)))
        %s
        (drop (call $write (i32.const 1024) (local.get $len)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $recs)))
      (br $batches))))
`, max(pages, 2), decls, body)
	case "fluvio":
		src = fmt.Sprintf(`(module
  (import "env" "copy_records" (func $copy (param i32 i32)))
  (memory (export "memory") %d)
  %s
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "dealloc") (param i32 i32))
  (func (export "map") (param $ptr i32) (param $len i32) (param $v i32) (result i32)
    %s
    (i32.const 0)))
`, max(pages, 2), decls, body)
	default:
		t.Fatalf("no shell for ABI %q", abi)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, name+".wat")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+".wasm")
	var extra []string
	if noCheck {
		extra = append(extra, "--no-check")
	}
	testenv.Wat2Wasm(t, file, out, extra...)
	return out
}

// TestForeignSandbox: the attacks the sandbox holds against in a streamd
// plugin (TestHostileFuelRewrite, TestHostileBulkWork, TestHostileStart,
// TestHostileTables, the memory cap), made in a Redpanda data transform
// and in a Fluvio SmartModule, are stopped the same way: refused at load,
// or the call failing with the same kind within twice its timeout.
func TestForeignSandbox(t *testing.T) {
	const mib16 = 16 << 20
	attacks := []struct {
		name, decls, start, body string
		only                     string // the one ABI the attack is for ("": both)
		pages                    int
		noCheck, load            bool
		kind                     error
		msg                      string
	}{
		{name: "spin", body: `(loop $l (br $l))`, kind: plugins.ErrTimeout, msg: "timed out"},
		{name: "fill-loop", pages: 256, body: `(loop $l ` +
			repeat(fmt.Sprintf(`(memory.fill (i32.const 0) (i32.const 1) (i32.const %d))`, mib16), 4) + ` (br $l))`,
			kind: plugins.ErrTimeout, msg: "timed out"},
		{name: "straight-leaf", decls: `(func $leaf (local i64)` +
			repeat(`(local.set 0 (i64.div_u (i64.add (local.get 0) (i64.const 12345)) (i64.const 7)))`, 20000) + `)`,
			body: `(loop $l (call $leaf) (br $l))`, kind: plugins.ErrTimeout, msg: "timed out"},
		{name: "memory-grow", body: `(if (i32.eq (memory.grow (i32.const 1000)) (i32.const -1)) (then unreachable))`,
			kind: plugins.ErrMemoryLimit, msg: "more than max_memory_pages = 256 (16 MiB) allows"},
		{name: "table-grow", decls: `(table $t 1 funcref)`,
			body: `(if (i32.eq (table.grow $t (ref.null func) (i32.const 16777216)) (i32.const -1)) (then unreachable))`,
			kind: plugins.ErrMemoryLimit, msg: "more than max_table_elements = 1048576 (8 MiB) allows"},
		{name: "memory-initial", pages: 257, load: true, kind: plugins.ErrMemoryLimit, msg: "the module's initial memory is 257 pages"},
		{name: "start-loop", start: `(loop $l (br $l))`, load: true, kind: plugins.ErrTimeout, msg: "instantiate"},
		// Fluvio's init runs at load, as Redpanda's main does up to its
		// first batch (TestRedpandaHostile/spin-setup).
		{name: "init-loop", only: "fluvio", decls: `(func (export "init") (param i32 i32 i32) (result i32) (loop $l (br $l)) (i32.const 0))`,
			load: true, kind: plugins.ErrTimeout, msg: "timed out"},
		{name: "refuel", decls: `(global $g (mut i32) (i32.const 0))`, noCheck: true, load: true,
			body: `(loop $l (global.set 1 (i32.const 1000000)) (br $l))`,
			kind: runtime.ErrNotPlugin, msg: "global.set 1: the module declares 1 globals"},
	}
	for _, abi := range []string{"redpanda", "fluvio"} {
		for _, a := range attacks {
			if a.only != "" && a.only != abi {
				continue
			}
			t.Run(abi+"/"+a.name, func(t *testing.T) {
				if inChild(t, abi+" "+a.name) {
					return
				}
				path := foreignShell(t, abi, a.name, a.pages, a.decls, a.start, a.body, a.noCheck)
				opts := plugins.Options{Pool: 1, Timeout: hostileTimeout}
				if !a.load {
					// As TestHostileBulkWork: the compile is not part of
					// what is bounded (straight-leaf's takes seconds
					// under the race detector).
					err := callBounded(t, loadHostile(t, newHost(t), path, opts), abi+" "+a.name)
					if !errors.Is(err, a.kind) || !strings.Contains(err.Error(), a.msg) {
						t.Fatalf("call: %v; want a %v that says %q", err, a.kind, a.msg)
					}
					return
				}
				m, d, err := loadWithin(t, path, a.name, opts)
				if m != nil {
					t.Fatalf("%s %s loaded; want it refused", abi, a.name)
				}
				if !errors.Is(err, a.kind) || !strings.Contains(err.Error(), a.msg) {
					t.Fatalf("load: %v; want a %v that says %q", err, a.kind, a.msg)
				}
				if d > hostileBound+time.Second { // + the compile
					t.Errorf("the load took %v", d)
				}
			})
		}
	}
}

// TestFluvioFilterMap: a filter_map SmartModule (fluvio-smartmodule's
// README has no example of one; this one is written by hand) returns the
// records it keeps, each with its input's offset delta and the key and
// value it made: here only the second of three, with value "hi". That
// record keeps its input's key, headers, timestamp and position; the
// others are filtered out.
func TestFluvioFilterMap(t *testing.T) {
	// Output: one record (offset delta 1, no key, value "hi"), no error.
	src := `(module
  (import "env" "copy_records" (func $copy (param i32 i32)))
  (memory (export "memory") 2)
  (data (i32.const 8192) "\00\00\00\01\10\00\00\02\00\04hi\00\00")
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "dealloc") (param i32 i32))
  (func (export "filter_map") (param $ptr i32) (param $len i32) (param $v i32) (result i32)
    (call $copy (i32.const 8192) (i32.const 14))
    (i32.const 1)))` // the SDK returns the number of records it output
	dir := t.TempDir()
	file := filepath.Join(dir, "filter_map.wat")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "filter_map.wasm")
	testenv.Wat2Wasm(t, file, out)
	m := load(t, out, plugins.Options{Pool: 1})
	if abi := m.ABI(); abi.Name != runtime.ABIFluvio || abi.Kind != "filter_map" {
		t.Fatalf("ABI %v", abi)
	}
	want(t, "filter_map", call(t, m, vals("a", "b", "c")),
		`1: null="hi" h:"x" @1767225600001 p3 o101`)
}
