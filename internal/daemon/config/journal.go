package config

import "strings"

// StoreKind is the kind of store [journal] store names.
type StoreKind int

// The kinds of journal store.
const (
	StoreUnknown  StoreKind = iota // none of the below: refused by Load
	StoreSQLite                    // sqlite:PATH, the embedded default
	StorePostgres                  // postgres://... or postgresql://...
	StorePlugin                    // wasm:PATH or native:PATH, a sink plugin
)

// JournalStore is what [journal] store names, as the daemon and
// `streamd journal` open it: its kind, and the DSN journal.OpenStore takes,
// with a sqlite PATH resolved against the config file's folder. A plugin
// store's DSN is the reference the plugin loaders take (wasm:PATH,
// native:PATH), unresolved, as every plugin reference in a config is given
// to the loader.
func (c *Config) JournalStore() (StoreKind, string) {
	if c.Journal == nil {
		return StoreUnknown, ""
	}
	s := c.Journal.Store
	switch {
	case strings.HasPrefix(s, "sqlite:"):
		return StoreSQLite, "sqlite:" + c.Resolve(strings.TrimPrefix(s, "sqlite:"))
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		return StorePostgres, s
	case strings.HasPrefix(s, "wasm:"), strings.HasPrefix(s, "native:"):
		return StorePlugin, s
	}
	return StoreUnknown, s
}
