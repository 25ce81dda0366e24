package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/runtime"
)

// TestFuelTimeoutIsPrompt: an instrumented guest in an endless loop stops
// right after its timeout, call after call.
func TestFuelTimeoutIsPrompt(t *testing.T) {
	m := load(t, wat(t, "misbehave"), plugins.Options{Pool: 1, Timeout: 200 * time.Millisecond, Config: map[string]any{"mode": "loop"}})
	for range 3 {
		start := time.Now()
		_, err := m.Call(context.Background(), runtime.OpTransform, recs("a"))
		if !errors.Is(err, runtime.ErrBatch) {
			t.Fatalf("err %v, want ErrBatch", err)
		}
		// The guest is stopped within a refill (microseconds) of the
		// deadline; allow for a busy machine.
		if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
			t.Fatalf("call ended after %v, want just after the 200ms timeout", d)
		}
	}
}

// TestFuelCache: with a cache directory the instrumented module is kept,
// and a damaged copy is rewritten rather than used.
func TestFuelCache(t *testing.T) {
	dir := t.TempDir()
	path := wat(t, "identity")
	h := newHost(t)
	ctx := context.Background()
	loadIt := func() {
		t.Helper()
		m, err := h.Load(ctx, path, plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{CacheDir: dir}})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(ctx)
		res, err := m.Call(ctx, runtime.OpTransform, recs("a", "b"))
		if err != nil || len(res) != 2 {
			t.Fatalf("call: %v %+v", err, res)
		}
	}
	loadIt()
	files, _ := filepath.Glob(filepath.Join(dir, "fuel", "*.wasm"))
	if len(files) != 1 {
		t.Fatalf("fuel cache holds %v, want one file", files)
	}
	good, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, damaged := range [][]byte{good[:len(good)/2], append([]byte("\x00asm\x01\x00\x00\x00garbage"), good[len(good)-4:]...), nil} {
		if err := os.WriteFile(files[0], damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		loadIt()
		if b, _ := os.ReadFile(files[0]); string(b) != string(good) {
			t.Fatalf("damaged cache file (%d bytes) not rewritten", len(damaged))
		}
	}
}
