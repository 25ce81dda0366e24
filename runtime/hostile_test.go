package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/runtime"
)

// A hostile is a plugin written by hand to attack the sandbox: a minimal
// transform (the ABI's exports, a manifest, an init that accepts anything)
// whose streamd_process runs process and then fails the batch (ERR_BATCH),
// with decls added to the module and, when start is not empty, a start
// function running start. noCheck builds a module that is invalid as
// written (wat2wasm --no-check).
type hostile struct {
	name    string
	pages   int // initial memory, in pages (0: 1)
	decls   string
	start   string
	process string
	noCheck bool
}

// hostileTimeout is the call timeout of the hostile plugins: every call
// must end within twice that (hostileBound).
const hostileTimeout = 500 * time.Millisecond

// hostileBound is the longest a call of a hostile plugin may take: twice
// its timeout.
const hostileBound = 2 * hostileTimeout

func (h hostile) build(t *testing.T) string {
	t.Helper()
	manifest := `{"name":"hostile","kind":"transform","version":"1.0.0","abi":1}`
	start := ""
	if h.start != "" {
		start = "(start $start)\n(func $start (local $i i32)\n" + h.start + ")"
	}
	src := fmt.Sprintf(`(module
  (import "streamd" "reply" (func $reply (param i32 i32)))
  (import "streamd" "log" (func $log (param i32 i32 i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (memory (export "memory") %d)
  %s
  (func (export "streamd_abi_v1"))
  (func (export "streamd_buffer") (param i32) (result i32) (i32.const 1024))
  (data (i32.const 0) %q)
  (func (export "streamd_manifest") (result i32) (call $reply (i32.const 0) (i32.const %d)) (i32.const 0))
  (func (export "streamd_init") (param i32) (result i32) (i32.const 0))
  (func $process (export "streamd_process") (param $len i32) (result i32) (local $i i32)
    %s
    (i32.const 2))
  %s)
`, max(h.pages, 1), h.decls, manifest, len(manifest), h.process, start)
	dir := t.TempDir()
	file := filepath.Join(dir, h.name+".wat")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, h.name+".wasm")
	var extra []string
	if h.noCheck {
		extra = append(extra, "--no-check")
	}
	testenv.Wat2Wasm(t, file, out, extra...)
	return out
}

// repeat returns s n times.
func repeat(s string, n int) string { return strings.Repeat(s+"\n", n) }

// callBounded calls m once with a record, under the test's deadline, and
// fails the test when the call ran longer than hostileBound (or was not
// stopped at all). It returns the call's error.
func callBounded(t *testing.T, m *runtime.Module, guest string) error {
	t.Helper()
	start := time.Now()
	_, err := callWithin(deadline(t), m, guest, recs("a"))
	d := time.Since(start)
	if errors.Is(err, errNotStopped) {
		t.Fatal(err)
	}
	if d > hostileBound {
		t.Fatalf("%s: the call took %v, more than twice its %v timeout (%v)", guest, d.Round(time.Millisecond), hostileTimeout, err)
	}
	t.Logf("%s: the call ended after %v: %v", guest, d.Round(time.Millisecond), err)
	return err
}

// loadWithin loads path under the test's deadline: a load still running
// then fails the test, naming guest, instead of hanging it.
func loadWithin(t *testing.T, path, guest string, opts plugins.Options) (*runtime.Module, time.Duration, error) {
	t.Helper()
	if opts.Wasm.CacheDir == "" {
		opts.Wasm.CacheDir = filepath.Join(tmpRoot, "cache")
	}
	type result struct {
		m   *runtime.Module
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		m, err := newHost(t).Load(context.Background(), path, opts)
		done <- result{m, err}
	}()
	select {
	case r := <-done:
		if r.m != nil {
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), stuckGrace)
				defer cancel()
				testenv.Close(t, ctx, r.m)
			})
		}
		return r.m, time.Since(start), r.err
	case <-deadline(t).Done():
		t.Fatalf("%s: %v: its load ran until the test's %v deadline", guest, errNotStopped, hostileDeadline)
	}
	return nil, 0, nil
}

// TestHostileFuelRewrite: a module that names a global it does not declare,
// one past its own, would name the fuel counter the instrumentation adds
// there, and refill it forever. It is refused at load, with the function
// and the instruction's offset; so are the other indices the rewrite
// could make valid (a type, a local).
func TestHostileFuelRewrite(t *testing.T) {
	for _, tc := range []struct {
		h    hostile
		want []string
	}{
		{hostile{name: "refuel", decls: `(global $g (mut i32) (i32.const 0))`,
			process: `(loop $l (global.set 1 (i32.const 1000000)) (br $l))`, noCheck: true},
			[]string{"function 7 (streamd_process)", "instruction at offset 0x", "global.set 1: the module declares 1 globals"}},
		{hostile{name: "readfuel", process: `(drop (global.get 0))`, noCheck: true},
			[]string{"function 7 (streamd_process)", "global.get 0: the module declares 0 globals"}},
		{hostile{name: "newtype", decls: `(table 1 funcref)`,
			process: `(drop (call_indirect (type 6) (i32.const 0)))`, noCheck: true},
			[]string{"function 7 (streamd_process)", "call_indirect of type 6: the module declares 6 types"}},
		{hostile{name: "newlocal", process: `(local.set 2 (i32.const 1))`, noCheck: true},
			[]string{"function 7 (streamd_process)", "local.set 2: the function has 2 locals"}},
	} {
		t.Run(tc.h.name, func(t *testing.T) {
			if inChild(t, tc.h.name) {
				return
			}
			path := tc.h.build(t)
			m, _, err := loadWithin(t, path, tc.h.name, plugins.Options{Pool: 1, Timeout: hostileTimeout})
			if err == nil {
				err := callBounded(t, m, tc.h.name)
				t.Fatalf("%s loaded, and its call ended with %v; want it refused at load", tc.h.name, err)
			}
			if !errors.Is(err, runtime.ErrNotPlugin) || !strings.Contains(err.Error(), "not a valid WebAssembly module") {
				t.Errorf("error %v, want a module that is not valid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not say %q", err, w)
				}
			}
		})
	}
}

// TestHostileBulkWork: whatever the guest does between two loop heads, a
// call ends within twice its timeout: bulk memory and table instructions
// and host calls cost in proportion to their size, and long straight-line
// code is checked inside.
func TestHostileBulkWork(t *testing.T) {
	const mib16 = 16 << 20
	for _, h := range []hostile{
		{name: "fill-loop", pages: 256, process: `(loop $l ` +
			repeat(fmt.Sprintf(`(memory.fill (i32.const 0) (i32.const 1) (i32.const %d))`, mib16), 4) + ` (br $l))`},
		{name: "fill-straight", pages: 256,
			process: repeat(fmt.Sprintf(`(memory.fill (i32.const 0) (i32.const 1) (i32.const %d))`, mib16), 3000)},
		{name: "copy-loop", pages: 256, process: `(loop $l ` +
			fmt.Sprintf(`(memory.copy (i32.const 0) (i32.const 1) (i32.const %d))`, mib16-1) + ` (br $l))`},
		{name: "table-fill", decls: `(table $t 1000000 funcref)`, process: `(loop $l ` +
			`(table.fill $t (i32.const 0) (ref.null func) (i32.const 1000000)) (br $l))`},
		{name: "table-copy", decls: `(table $t 1000000 funcref)`, process: `(loop $l ` +
			`(table.copy $t $t (i32.const 1) (i32.const 0) (i32.const 999999)) (br $l))`},
		{name: "random-loop", pages: 256, process: `(loop $l ` +
			fmt.Sprintf(`(drop (call $random_get (i32.const 0) (i32.const %d)))`, mib16) + ` (br $l))`},
		{name: "straight-leaf", decls: `(func $leaf (local i64)` +
			repeat(`(local.set 0 (i64.div_u (i64.add (local.get 0) (i64.const 12345)) (i64.const 7)))`, 20000) + `)`,
			process: `(loop $l (call $leaf) (br $l))`},
	} {
		t.Run(h.name, func(t *testing.T) {
			if inChild(t, h.name) {
				return
			}
			m := loadHostile(t, newHost(t), h.build(t), plugins.Options{Pool: 1, Timeout: hostileTimeout})
			err := callBounded(t, m, h.name)
			if !errors.Is(err, plugins.ErrTimeout) {
				t.Fatalf("%s: error %v, want a timeout", h.name, err)
			}
		})
	}
}

// TestHostileStart: a start function runs while the module is
// instantiated, at load, under the same timeout as a call.
func TestHostileStart(t *testing.T) {
	for _, h := range []hostile{
		{name: "start-loop", start: `(loop $l (br $l))`},
		{name: "start-fill", pages: 256, start: `(loop $l (memory.fill (i32.const 0) (i32.const 1) (i32.const 16777216)) (br $l))`},
	} {
		t.Run(h.name, func(t *testing.T) {
			if inChild(t, h.name) {
				return
			}
			m, d, err := loadWithin(t, h.build(t), h.name, plugins.Options{Pool: 1, Timeout: hostileTimeout})
			if m != nil {
				t.Fatalf("%s loaded", h.name)
			}
			if !errors.Is(err, plugins.ErrTimeout) || !strings.Contains(err.Error(), "instantiate") {
				t.Fatalf("%s: error %v, want a timeout while it is instantiated", h.name, err)
			}
			if d > hostileBound {
				t.Fatalf("%s: the load took %v, more than twice its %v timeout", h.name, d, hostileTimeout)
			}
			t.Logf("%s: refused after %v: %v", h.name, d.Round(time.Millisecond), err)
		})
	}
}

// TestHostileTables: tables count against a cap of their own,
// max_table_elements (8 bytes an element): a table that starts above it
// does not load, and a growth past it is refused, the call failing with
// the memory limit.
func TestHostileTables(t *testing.T) {
	t.Run("grow", func(t *testing.T) {
		if inChild(t, "table-grow") {
			return
		}
		h := hostile{name: "table-grow", decls: `(table $t 1 funcref)`, process: `
			(if (i32.eq (table.grow $t (ref.null func) (i32.const 16777216)) (i32.const -1)) (then unreachable))
			(table.fill $t (i32.const 0) (ref.null func) (table.size $t))`}
		m := loadHostile(t, newHost(t), h.build(t), plugins.Options{Pool: 1, Timeout: hostileTimeout})
		err := callBounded(t, m, h.name)
		want := "memory limit reached: the guest asked for a table of 16777217 elements (128 MiB), more than max_table_elements = 1048576 (8 MiB) allows"
		if !errors.Is(err, plugins.ErrMemoryLimit) || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %q", err, want)
		}
	})
	t.Run("initial", func(t *testing.T) {
		if inChild(t, "table-initial") {
			return
		}
		h := hostile{name: "table-initial", decls: `(table $t 16777216 funcref)`}
		m, _, err := loadWithin(t, h.build(t), h.name, plugins.Options{Pool: 1, Timeout: hostileTimeout})
		if m != nil {
			t.Fatalf("%s loaded", h.name)
		}
		want := "memory limit reached: table 0 starts with 16777216 elements (128 MiB), more than max_table_elements = 1048576 (8 MiB)"
		if !errors.Is(err, plugins.ErrMemoryLimit) || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %q", err, want)
		}
	})
}

// countingHandler counts the log lines and message bytes a plugin's logger
// receives, and keeps the lines that say something was dropped.
type countingHandler struct {
	mu      sync.Mutex
	lines   int
	bytes   int
	dropped []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines++
	h.bytes += len(r.Message)
	if strings.Contains(r.Message, "dropped") {
		h.dropped = append(h.dropped, r.Message)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestHostileLog: what a guest logs is bounded per log call and per record
// of a call, in lines and bytes; the rest is counted and dropped, with one
// line saying so. A guest that logs in a loop is stopped by its timeout.
func TestHostileLog(t *testing.T) {
	for _, tc := range []struct {
		h        hostile
		timeout  bool
		maxLines int
		maxBytes int
	}{
		// One record: the defaults allow 16 lines and 16 KiB for it, a line
		// at most 4 KiB.
		{h: hostile{name: "log-huge", pages: 256, process: `(memory.fill (i32.const 0) (i32.const 97) (i32.const 16777216))
			(loop $l (call $log (i32.const 1) (i32.const 0) (i32.const 16777216)) (br $l))`}, timeout: true,
			maxLines: 4 + 1, maxBytes: 16<<10 + 512},
		{h: hostile{name: "log-lines", process: `(local.set $i (i32.const 100000))
			(loop $l (call $log (i32.const 1) (i32.const 2000) (i32.const 10))
				(br_if $l (local.tee $i (i32.sub (local.get $i) (i32.const 1)))))`},
			maxLines: 16 + 1, maxBytes: 160 + 512},
	} {
		t.Run(tc.h.name, func(t *testing.T) {
			if inChild(t, tc.h.name) {
				return
			}
			h := &countingHandler{}
			m := loadHostile(t, newHost(t), tc.h.build(t), plugins.Options{Pool: 1, Timeout: hostileTimeout, Logger: slog.New(h)})
			err := callBounded(t, m, tc.h.name)
			if tc.timeout != errors.Is(err, plugins.ErrTimeout) {
				t.Fatalf("%s: error %v (want a timeout: %v)", tc.h.name, err, tc.timeout)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.lines > tc.maxLines || h.bytes > tc.maxBytes {
				t.Fatalf("%s: the guest logged %d lines, %d bytes; want at most %d lines, %d bytes", tc.h.name, h.lines, h.bytes, tc.maxLines, tc.maxBytes)
			}
			if len(h.dropped) != 1 {
				t.Fatalf("%s: lines saying what was dropped: %q, want one", tc.h.name, h.dropped)
			}
			t.Logf("%s: %d lines, %d bytes; %s", tc.h.name, h.lines, h.bytes, h.dropped[0])
		})
	}
}

// TestHostileCompile: a module larger than max_module_bytes is refused
// before it is read whole; one whose compile runs past compile_timeout is
// given up on at the deadline (wazero stops before its next function);
// one with a function whose compile time would be unbounded is refused
// before it is compiled.
func TestHostileCompile(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("(block ", n) + strings.Repeat(")", n) }
	t.Run("size", func(t *testing.T) {
		h := hostile{name: "big", decls: `(data (i32.const 4096) "` + strings.Repeat("x", 200_000) + `")`}
		m, d, err := loadWithin(t, h.build(t), h.name, plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{MaxModuleBytes: 100_000}})
		if m != nil || err == nil || !strings.Contains(err.Error(), "more than max_module_bytes = 100000 (97.7 KiB) allows") {
			t.Fatalf("error %v, want the module refused for its size", err)
		}
		t.Logf("refused after %v: %v", d.Round(time.Millisecond), err)
	})
	t.Run("deadline", func(t *testing.T) {
		// 12 functions nested 8,000 deep: about 0.5 s each to compile.
		var decls strings.Builder
		for i := range 12 {
			fmt.Fprintf(&decls, "(func $deep%d %s)\n", i, deep(8000))
		}
		h := hostile{name: "slow", decls: decls.String()}
		path := h.build(t)
		const timeout = time.Second
		m, d, err := loadWithin(t, path, h.name, plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{CompileTimeout: timeout, CacheDir: t.TempDir()}})
		if m != nil || err == nil || !strings.Contains(err.Error(), "compiling took longer than compile_timeout = 1s") {
			t.Fatalf("error %v, want the compile given up on", err)
		}
		// The deadline, and at most one function's compile to notice it.
		if d > timeout+1500*time.Millisecond {
			t.Fatalf("the load took %v, want about its %v compile_timeout", d, timeout)
		}
		t.Logf("refused after %v: %v", d.Round(time.Millisecond), err)
	})
	t.Run("complex", func(t *testing.T) {
		h := hostile{name: "complex", decls: "(func $deep " + deep(9000) + ")"}
		m, _, err := loadWithin(t, h.build(t), h.name, plugins.Options{Pool: 1})
		if m != nil || err == nil || !strings.Contains(err.Error(), "too complex to compile in bounded time") ||
			!strings.Contains(err.Error(), "blocks nest more than 8192 deep") {
			t.Fatalf("error %v, want the function refused as too complex", err)
		}
		t.Logf("%v", err)
	})
}
