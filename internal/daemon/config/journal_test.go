package config

import (
	"path/filepath"
	"testing"
)

func TestJournalStore(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "streamd.toml")
	for _, c := range []struct {
		store string
		kind  StoreKind
		dsn   string
	}{
		{"sqlite:journal.db", StoreSQLite, "sqlite:" + filepath.Join(dir, "journal.db")},
		{"sqlite:/var/lib/j.db", StoreSQLite, "sqlite:/var/lib/j.db"},
		{"postgres://u@h/db", StorePostgres, "postgres://u@h/db"},
		{"postgresql://u@h/db", StorePostgres, "postgresql://u@h/db"},
		{"wasm:store.wasm", StorePlugin, "wasm:store.wasm"},
		{"native:./store", StorePlugin, "native:./store"},
		{"mysql://h/db", StoreUnknown, "mysql://h/db"},
	} {
		cfg := &Config{File: file, Journal: &Journal{Store: c.store}}
		if kind, dsn := cfg.JournalStore(); kind != c.kind || dsn != c.dsn {
			t.Errorf("JournalStore(%q) = %v, %q; want %v, %q", c.store, kind, dsn, c.kind, c.dsn)
		}
	}
	if kind, _ := (&Config{}).JournalStore(); kind != StoreUnknown {
		t.Errorf("no [journal]: kind %v, want StoreUnknown", kind)
	}
}
