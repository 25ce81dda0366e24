package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/testenv"
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
		defer testenv.Close(t, ctx, m)
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

// TestFuelFallbackLogged: a module the fuel instrumentation cannot read
// still loads and its timeout still stops it (wazero's own checks), and
// the host says so in one warning naming the plugin and the reason, since
// its code then runs 2-10x slower. A module it reads logs nothing of the
// kind. Before, the fallback was silent.
func TestFuelFallbackLogged(t *testing.T) {
	path := wat(t, "misbehave")
	for _, tc := range []struct {
		name     string
		rewrite  func([]byte, string, string, uint32) ([]byte, error)
		wantWarn bool
	}{
		{"unreadable", func([]byte, string, string, uint32) ([]byte, error) {
			return nil, errors.New("unsupported by the fuel instrumentation: opcode 0xfd 300 at offset 77")
		}, true},
		{"readable", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := newHost(t)
			if tc.rewrite != nil {
				runtime.SetRewrite(h, tc.rewrite)
			}
			ctx := context.Background()
			m, err := h.Load(ctx, path, plugins.Options{Pool: 1, Timeout: 200 * time.Millisecond, Config: map[string]any{"mode": "loop"},
				Logger: slog.New(slog.NewTextHandler(&buf, nil)), Wasm: plugins.WasmOptions{CacheDir: t.TempDir()}})
			if err != nil {
				t.Fatal(err)
			}
			defer testenv.Close(t, ctx, m)
			start := time.Now()
			if _, err := m.Call(ctx, runtime.OpTransform, recs("a")); !errors.Is(err, runtime.ErrBatch) {
				t.Fatalf("err %v, want ErrBatch (the timeout)", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the looping guest was stopped after %v, want about its 200ms timeout", d)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if strings.Contains(l, "fuel") {
					lines = append(lines, l)
				}
			}
			if !tc.wantWarn {
				if len(lines) != 0 {
					t.Fatalf("fueled load logged %q", lines)
				}
				return
			}
			if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "plugin="+path) ||
				!strings.Contains(lines[0], "opcode 0xfd 300 at offset 77") || !strings.Contains(lines[0], "slower") {
				t.Fatalf("log lines about fuel %q, want one warning naming plugin=%s, the reason and the slower checks", lines, path)
			}
			t.Log(lines[0])
		})
	}
}
