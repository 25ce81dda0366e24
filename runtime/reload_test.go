package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/runtime"
)

// identityVersion builds the WAT identity with its manifest version replaced.
func identityVersion(t *testing.T, version string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "examples", "wasm", "wat", "identity.wat"))
	if err != nil {
		t.Fatal(err)
	}
	if len(version) != len("1.0.0") {
		t.Fatal("version must keep the manifest length")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "v.wat"), filepath.Join(dir, "v.wasm")
	if err := os.WriteFile(in, []byte(strings.Replace(string(src), "1.0.0", version, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Wat2Wasm(t, in, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replaceFile swaps the file's contents atomically, as a deploy would.
func replaceFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestReload(t *testing.T) {
	v1, v2 := identityVersion(t, "1.0.0"), identityVersion(t, "2.0.0")
	path := filepath.Join(t.TempDir(), "plugin.wasm")
	replaceFile(t, path, v1)
	ctx := context.Background()
	w, err := newHost(t).LoadWatched(ctx, path, plugins.Options{Pool: 2}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, ctx, w)

	if swapped, err := w.Reload(ctx); err != nil || swapped {
		t.Fatalf("Reload of an unchanged file: %v, %v", swapped, err)
	}
	// Callers keep calling while the module is swapped: every call gets
	// exactly one complete answer.
	var calls atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := recs("a", "b", "c")
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := w.Call(ctx, runtime.OpTransform, in)
				if err != nil {
					errs <- err
					return
				}
				if len(res) != 3 || len(res[0].Records) != 1 {
					errs <- fmt.Errorf("bad result %+v", res)
					return
				}
				calls.Add(1)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	replaceFile(t, path, v2)
	swapped, err := w.Reload(ctx)
	if err != nil || !swapped {
		t.Fatalf("Reload of a new version: %v, %v", swapped, err)
	}
	if got := w.Manifest().Version; got != "2.0.0" {
		t.Fatalf("version after reload %q", got)
	}
	before := calls.Load()
	for calls.Load() < before+10 {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("call during reload: %v", err)
	}

	// A different plugin under the same path is refused; v2 keeps running.
	replaceFile(t, path, mustRead(t, wat(t, "poison")))
	if _, err := w.Reload(ctx); err == nil || !strings.Contains(err.Error(), `new version is transform plugin "poison"`) {
		t.Fatalf("Reload of another plugin: %v", err)
	}
	// So is a broken file.
	replaceFile(t, path, []byte("garbage"))
	if _, err := w.Reload(ctx); err == nil || !strings.Contains(err.Error(), "not a WebAssembly module") {
		t.Fatalf("Reload of garbage: %v", err)
	}
	if got := w.Manifest(); got.Name != "identity" || got.Version != "2.0.0" {
		t.Fatalf("manifest after refused reloads %+v", got)
	}
	if w.Reloads() != 1 {
		t.Fatalf("Reloads() = %d, want 1", w.Reloads())
	}
}

func TestReloadPolling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plugin.wasm")
	replaceFile(t, path, identityVersion(t, "1.0.0"))
	v2 := identityVersion(t, "2.0.0")
	ctx := context.Background()
	w, err := newHost(t).LoadWatched(ctx, path, plugins.Options{}, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, ctx, w)
	replaceFile(t, path, v2)
	deadline := time.Now().Add(20 * time.Second)
	for w.Manifest().Version != "2.0.0" {
		if time.Now().After(deadline) {
			t.Fatal("the poller did not pick up the new version")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := w.Call(ctx, runtime.OpTransform, recs("a")); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
