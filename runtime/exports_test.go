package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/runtime"
)

// TestMissingExportsSayWhatIsThere: a module without streamd's exports (a
// Zig build without -rdynamic exports only its memory) is refused with the
// exports it has and where the docs say how to build one.
func TestMissingExportsSayWhatIsThere(t *testing.T) {
	dir := t.TempDir()
	bare := `(module (memory (export "memory") 2) (func (export "_start")))`
	if err := os.WriteFile(filepath.Join(dir, "bare.wat"), []byte(bare), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHost(t)
	for _, tt := range []struct {
		path string
		want string
	}{
		{watFile(t, filepath.Join(dir, "bare.wat")), `bare.wasm: not a streamd plugin: missing export streamd_abi_vN (the module exports: _start, memory); docs/plugins.md, "A language without an SDK", says what a plugin exports and how to build one`},
		{wat(t, "noexport"), `noexport.wasm: not a streamd plugin: missing export streamd_process (the module exports: memory, streamd_abi_v1, streamd_buffer, streamd_init, streamd_manifest); docs/plugins.md, "A language without an SDK"`},
	} {
		_, err := h.Load(context.Background(), tt.path, plugins.Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, runtime.ErrNotPlugin) {
			t.Errorf("Load: %v\nwant %q", err, tt.want)
		}
	}
}
