package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/streamd/streamd/journal/internal/sqlstore"
	"github.com/streamd/streamd/journal/internal/store"
	"github.com/streamd/streamd/plugins"
)

// Store is where the replicator keeps journals and readers find them:
// SQLite, PostgreSQL, or a sink plugin (write-only). One Store value is
// safe for concurrent use by a Replicator and any number of Journals.
type Store struct {
	s        store.Store
	readable bool
	desc     string
}

// StoreOption configures OpenStore.
type StoreOption func(*storeConfig)

type storeConfig struct {
	open  plugins.OpenFunc
	popts plugins.Options
	sql   []sqlstore.Option
}

// WithStoreLogger sets where OpenStore reports schema migrations of the
// SQL stores (default: nowhere). A migration can take a while on a large
// store; the log says when it starts and how long it took.
func WithStoreLogger(l *slog.Logger) StoreOption {
	return func(c *storeConfig) { c.sql = append(c.sql, sqlstore.WithLogger(l)) }
}

// WithPlugins lets OpenStore open "wasm:PATH" and "native:PATH" stores:
// open (plugins/load.Open in streamd) is called with the whole dsn as the
// reference and opts with Kind set to sink.
func WithPlugins(open plugins.OpenFunc, opts plugins.Options) StoreOption {
	return func(c *storeConfig) { c.open, c.popts = open, opts }
}

// OpenStore opens the store named by dsn, creating or migrating its schema:
//
//	sqlite:PATH                 SQLite file (created, with its directory, if missing)
//	postgres://... postgresql://...   PostgreSQL
//	wasm:PATH | native:PATH     a sink plugin (needs WithPlugins)
func OpenStore(ctx context.Context, dsn string, opts ...StoreOption) (*Store, error) {
	var c storeConfig
	for _, o := range opts {
		o(&c)
	}
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		s, err := sqlstore.OpenSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"), c.sql...)
		if err != nil {
			return nil, err
		}
		return &Store{s: s, readable: true, desc: dsn}, nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		s, err := sqlstore.OpenPostgres(ctx, dsn, c.sql...)
		if err != nil {
			return nil, err
		}
		return &Store{s: s, readable: true, desc: "postgres"}, nil
	case strings.HasPrefix(dsn, "wasm:"), strings.HasPrefix(dsn, "native:"):
		if c.open == nil {
			return nil, fmt.Errorf("journal store %q: plugin stores need a plugin loader (WithPlugins)", dsn)
		}
		popts := c.popts
		popts.Kind = plugins.KindSink
		p, err := c.open(ctx, dsn, popts)
		if err != nil {
			return nil, fmt.Errorf("journal store %q: %w", dsn, err)
		}
		sink, ok := p.(plugins.Sink)
		if !ok {
			_ = p.Close(ctx)
			return nil, fmt.Errorf("journal store %q: plugin %s is a %s, not a sink", dsn, p.Manifest().Name, p.Manifest().Kind)
		}
		return NewPluginStore(sink), nil
	case dsn == "":
		return nil, errors.New("journal store: empty; want sqlite:PATH, postgres://..., wasm:PATH or native:PATH")
	}
	return nil, fmt.Errorf("journal store %q: unknown kind; want sqlite:PATH, postgres://..., wasm:PATH or native:PATH", dsn)
}

// CheckStore reports, without opening, creating or changing anything
// (`streamd lint`), what OpenStore would refuse in dsn: an unknown kind, a
// SQLite path that is a directory or lies under a file. A SQLite store
// whose directory is missing gets an error wrapping fs.ErrNotExist:
// OpenStore creates the directory.
func CheckStore(dsn string) error {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		return sqlstore.CheckSQLitePath(strings.TrimPrefix(dsn, "sqlite:"))
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		if _, err := url.Parse(dsn); err != nil {
			return errors.New("journal store: the postgres URL does not parse") // the URL may hold a password: not echoed
		}
		return nil
	case strings.HasPrefix(dsn, "wasm:"), strings.HasPrefix(dsn, "native:"):
		return nil
	case dsn == "":
		return errors.New("journal store: empty; want sqlite:PATH, postgres://..., wasm:PATH or native:PATH")
	}
	return fmt.Errorf("journal store %q: unknown kind; want sqlite:PATH, postgres://..., wasm:PATH or native:PATH", dsn)
}

// ErrDiskFull is wrapped by a store error when its disk (or database) is
// full: SQLite's SQLITE_FULL, PostgreSQL's disk_full. Nothing of the
// failed write is applied; the replicator's Write fails as a whole and is
// retried.
var ErrDiskFull = sqlstore.ErrDiskFull

// NewMemoryStore returns an in-memory store (tests, examples).
func NewMemoryStore() *Store {
	return &Store{s: store.NewMemory(), readable: true, desc: "memory"}
}

// Readable reports whether Journals can read from the store. A plugin
// store is write-only: a Journal on it reads everything from Kafka.
func (s *Store) Readable() bool { return s.readable }

// Close closes the store (a plugin store closes its plugin); ctx bounds
// how long it may take.
func (s *Store) Close(ctx context.Context) error { return s.s.Close(ctx) }

// KafkaOnly returns a Store with nothing in it, for Journals whose real
// store cannot be read (a plugin store): they read every journal from
// Kafka, from the start of its partition. It cannot replicate.
func KafkaOnly() *Store {
	return &Store{s: &pluginStore{sink: nil}, readable: false, desc: "kafka-only"}
}
