package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/runtime"
)

// TestErrorsNameTheCause: a failed call says what happened in words a
// plugin author can act on, and wraps the plugins error of its kind:
// a refused memory growth names max_memory_pages
// instead of the trap it led to, a panic message the guest wrote to
// stderr is in the error (so in the record's error and its dead letter),
// a module without a name section shows the functions' own names or
// numbers in the trace, and an empty reply says so.
func TestErrorsNameTheCause(t *testing.T) {
	path := wat(t, "misbehave")
	tests := []struct {
		mode    string
		opts    plugins.Options
		kind    error
		want    []string
		notWant []string
	}{
		{"memory", plugins.Options{Wasm: plugins.WasmOptions{MaxMemoryPages: 64}}, plugins.ErrMemoryLimit,
			[]string{"batch failed: memory limit reached: the guest asked for 1 more page (64 KiB) with 64 pages (4 MiB) in use, more than max_memory_pages = 64 (4 MiB) allows"}, nil},
		{"huge grow", plugins.Options{Wasm: plugins.WasmOptions{MaxMemoryPages: 64}}, plugins.ErrMemoryLimit,
			[]string{"batch failed: memory limit reached: the guest asked for 1000 more pages (62.5 MiB) with 2 pages (128 KiB) in use, more than max_memory_pages = 64 (4 MiB) allows"}, nil},
		{"huge grow", plugins.Options{}, plugins.ErrMemoryLimit,
			[]string{"max_memory_pages = 256 (16 MiB) allows"}, nil},
		{"panic", plugins.Options{}, plugins.ErrTrap,
			[]string{"batch failed: plugin crashed: thread '<unnamed>' panicked at 'boom: no order_id', src/lib.rs:5:9: wasm error: unreachable"}, []string{"RUST_BACKTRACE"}},
		{"trap", plugins.Options{}, plugins.ErrTrap,
			[]string{"batch failed: plugin crashed: wasm error: unreachable", ".streamd_process(i32) i32"}, []string{".$"}},
		{"loop", plugins.Options{Timeout: 200 * time.Millisecond}, plugins.ErrTimeout,
			[]string{"batch failed: plugin call timed out after 200ms"}, nil},
		{"empty reply", plugins.Options{}, runtime.ErrBatch,
			[]string{"the guest returned OK without calling reply"}, []string{"short"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			opts := tt.opts
			opts.Pool = 1
			opts.Config = map[string]any{"mode": tt.mode}
			m := load(t, path, opts)
			for i := range 2 { // the same on a replacement instance
				_, err := m.Call(context.Background(), runtime.OpTransform, recs("a", "b"))
				if !errors.Is(err, tt.kind) || !errors.Is(err, runtime.ErrBatch) {
					t.Fatalf("call %d: error %v is not %v and ErrBatch", i, err, tt.kind)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("call %d: error %q does not contain %q", i, err, w)
					}
				}
				for _, w := range tt.notWant {
					if strings.Contains(err.Error(), w) {
						t.Errorf("call %d: error %q contains %q", i, err, w)
					}
				}
			}
		})
	}
}

// TestInitialMemoryAboveCap: a module whose initial memory is larger than
// max_memory_pages is refused at load with both numbers, not as an
// invalid module.
func TestInitialMemoryAboveCap(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "examples", "wasm", "wat", "identity.wat"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), `(memory (export "memory") 2)`, `(memory (export "memory") 300)`, 1)
	if text == string(src) {
		t.Fatal("identity.wat has no (memory (export \"memory\") 2)")
	}
	file := filepath.Join(t.TempDir(), "big.wat")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	path := watFile(t, file)
	_, err = newHost(t).Load(context.Background(), path, plugins.Options{})
	want := "big.wasm: memory limit reached: the module's initial memory is 300 pages (18.8 MiB), more than max_memory_pages = 256 (16 MiB)"
	if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, runtime.ErrNotPlugin) {
		t.Fatalf("error %v, want %q (and not ErrNotPlugin)", err, want)
	}
	if !errors.Is(err, plugins.ErrMemoryLimit) {
		t.Fatalf("error %v is not ErrMemoryLimit", err)
	}
	m := load(t, path, plugins.Options{Wasm: plugins.WasmOptions{MaxMemoryPages: 300}})
	if _, err := m.Call(context.Background(), runtime.OpTransform, recs("a")); err != nil {
		t.Fatal(err)
	}
}

// TestEmptyBatchNotSent: a batch of no records never reaches the guest
// (docs/abi.md section 7), so a guest need not handle count 0: the trap
// mode would fail any call that reached it.
func TestEmptyBatchNotSent(t *testing.T) {
	m := load(t, wat(t, "misbehave"), plugins.Options{Config: map[string]any{"mode": "trap"}})
	for _, op := range []runtime.Op{runtime.OpTransform, runtime.OpWrite} {
		if res, err := m.Call(context.Background(), op, nil); err != nil || len(res) != 0 {
			t.Fatalf("%s of no records: %v, %v", op, res, err)
		}
	}
}
