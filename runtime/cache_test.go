package runtime_test

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/runtime"
)

// loadLogged loads path with a fresh Host and the cache in dir and returns
// the module and what was logged.
func loadLogged(t *testing.T, path, dir string) (*runtime.Module, string, error) {
	t.Helper()
	var log bytes.Buffer
	m, err := newHost(t).Load(context.Background(), path, plugins.Options{
		Pool: 1,
		// Clock: no log line about a fake clock
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Wasm:   plugins.WasmOptions{CacheDir: dir, Clock: true},
	})
	if m != nil {
		testenv.CloseAtEnd(t, m)
	}
	return m, log.String(), err
}

// cacheFiles returns the regular files under dir and their sizes.
func cacheFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	files := map[string]int64{}
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				files[p] = fi.Size()
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return files
}

// TestCacheDamaged: a damaged entry in the compile cache (a torn write, a
// bad disk) does not make the plugin unloadable, nor is it reported as "not
// a valid WebAssembly module": the plugin loads without the cache and the
// warning names the cache directory and what was wrong.
func TestCacheDamaged(t *testing.T) {
	dir := t.TempDir()
	plugin := probePlugin(t)
	if _, log, err := loadLogged(t, plugin, dir); err != nil || log != "" {
		t.Fatalf("first load: %v; log %q", err, log)
	}
	damaged := 0
	for p, size := range cacheFiles(t, dir) {
		if strings.Contains(p, string(filepath.Separator)+"fuel"+string(filepath.Separator)) {
			continue // the fuel copy has its own checksum and is rewritten
		}
		if err := os.Truncate(p, size/2); err != nil {
			t.Fatal(err)
		}
		damaged++
	}
	if damaged == 0 {
		t.Fatalf("no compiled module in the cache: %v", cacheFiles(t, dir))
	}
	m, log, err := loadLogged(t, plugin, dir)
	if err != nil {
		t.Fatalf("load with a damaged cache entry: %v", err)
	}
	if !strings.Contains(log, "running without it") || !strings.Contains(log, dir) {
		t.Errorf("warning %q does not say the cache at %s was not used", log, dir)
	}
	if out := probe(t, m, "args")[0]; out != "ok:0 0" {
		t.Errorf("the plugin loaded without the cache answers %s", out)
	}
}
