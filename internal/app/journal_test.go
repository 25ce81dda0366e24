package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/app"
	"github.com/streamd/streamd/internal/config"
	"github.com/streamd/streamd/plugins/load"
)

func journalConfig(t *testing.T, store string) *config.Config {
	t.Helper()
	src := fmt.Sprintf(`
[kafka]
brokers = ["127.0.0.1:1"]
[journal]
store = %q
[[pipeline]]
name = "replicate"
[pipeline.source]
type = "kafka"
topics = ["orders-journal"]
group = "replicator"
[pipeline.sink]
type = "journal"
`, store)
	dir := t.TempDir()
	file := filepath.Join(dir, "streamd.toml")
	cfg, err := config.Parse(file, []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Issue 11 finding 10: `streamd lint` (Build then Close) checks the
// journal store without creating or changing anything: no database file,
// no directory. A store that could never be opened still fails lint,
// naming it.
func TestLintCreatesNoJournalStore(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	for _, tc := range []struct{ name, path string }{
		{"existing directory", filepath.Join(dir, "journal.db")},
		{"missing directory", filepath.Join(dir, "data", "sub", "journal.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := app.Build(ctx, journalConfig(t, "sqlite:"+tc.path), log, load.Open, io.Discard)
			if err != nil {
				t.Fatalf("lint: %v", err)
			}
			a.Close()
			for _, p := range []string{tc.path, tc.path + "-wal", tc.path + "-shm", filepath.Dir(tc.path)} {
				if p == dir {
					continue
				}
				if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("lint left %s behind (%v)", p, err)
				}
			}
		})
	}
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "journal.db")
	if _, err := app.Build(ctx, journalConfig(t, "sqlite:"+bad), log, load.Open, io.Discard); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("lint of a store under a file: %v, want an error naming %s", err, bad)
	}
}
