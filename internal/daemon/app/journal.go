package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/journal"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// journalParts are the journal pieces shared by the replicator pipelines,
// the expiry job and the HTTP API: one store, one client. Build only
// checks the store (lint creates and changes nothing: no database file,
// no directory, no connection); Run opens it before any pipeline starts.
type journalParts struct {
	dsn         string         // resolved [journal] store
	storePlugin plugins.Plugin // a plugin store's sink, loaded by journalSetup

	mu     sync.Mutex
	sinks  []*replicatorSink
	store  *journal.Store // set by open
	client *kgo.Client
	j      *journal.Journal
	// replicate gives a sink its Replicator once the store is open.
	replicate func(*replicatorSink) error
	expiry    time.Duration // [journal] expiry_interval
}

// replicatorSink is a journal pipeline's sink: the Replicator, once Run
// has opened the store.
type replicatorSink struct {
	pipeline string
	opts     []journal.Option
	r        atomic.Pointer[journal.Replicator]
}

func (s *replicatorSink) Write(ctx context.Context, batch []record.Record) ([]error, error) {
	r := s.r.Load()
	if r == nil {
		return nil, fmt.Errorf("journal replicator of pipeline %s: the journal store is not open (the daemon was not started)", s.pipeline)
	}
	return r.Write(ctx, batch)
}

// journalSetup checks the [journal] store once, without opening it (a
// plugin store's plugin is loaded, as lint loads every plugin).
func (a *App) journalSetup(ctx context.Context) (*journalParts, error) {
	if a.journal != nil {
		return a.journal, nil
	}
	// The journal's store plugin belongs to the app, not to the pipeline
	// being built.
	cur := a.cur
	a.cur = nil
	defer func() { a.cur = cur }()
	jc := a.cfg.Journal
	if jc == nil || jc.Store == "" {
		return nil, fmt.Errorf("%s: [journal] store is not set", a.cfg.File)
	}
	kind, dsn := a.cfg.JournalStore()
	jp := &journalParts{dsn: dsn, expiry: jc.ExpiryInterval.Duration}
	switch kind {
	case config.StoreSQLite:
		// A missing directory is created at start; anything else that
		// would stop the open is reported now.
		if err := journal.CheckStore(jp.dsn); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: journal.store: %w", a.cfg.File, err)
		}
	case config.StorePostgres:
	case config.StorePlugin:
		p, err := a.load(ctx, jc.Store, a.pluginOpts(plugins.KindSink, "journal-store", config.PluginSettings{Config: jc.Config}, 0))
		if err != nil {
			return nil, fmt.Errorf("%s: journal.store: %w", a.cfg.File, err)
		}
		if _, ok := p.(plugins.Sink); !ok {
			return nil, fmt.Errorf("%s: journal.store: plugin %s is a %s, not a sink", a.cfg.File, p.Manifest().Name, p.Manifest().Kind)
		}
		jp.storePlugin = p
	default:
		return nil, fmt.Errorf("%s: journal.store %q: unknown kind; want sqlite:PATH, postgres://..., wasm:PATH or native:PATH", a.cfg.File, jc.Store)
	}
	a.journal = jp
	return jp, nil
}

// open opens the store, the client and the Journal, and gives every
// journal pipeline its Replicator.
func (a *App) openJournal(ctx context.Context, jp *journalParts) error {
	loaded := func(context.Context, string, plugins.Options) (plugins.Plugin, error) { return jp.storePlugin, nil }
	st, err := journal.OpenStore(ctx, jp.dsn, journal.WithPlugins(loaded, plugins.Options{}), journal.WithStoreLogger(a.log))
	if err != nil {
		return fmt.Errorf("%s: journal.store: %w", a.cfg.File, err)
	}
	kc, err := a.kafkaCluster("")
	if err != nil {
		return errors.Join(fmt.Errorf("%s: %w", a.cfg.File, err), st.Close(ctx))
	}
	cl, err := kgo.NewClient(kc.Options()...)
	if err != nil {
		return errors.Join(err, st.Close(ctx))
	}
	a.closers = append(a.closers, func(ctx context.Context) error {
		err := jp.j.Close(ctx)
		cl.Close()
		return errors.Join(err, st.Close(ctx))
	})
	jp.mu.Lock()
	defer jp.mu.Unlock()
	// The consumers that read the head of a partition dial as the client
	// does (TLS, SASL).
	jp.store, jp.client, jp.j = st, cl, journal.New(cl, st, journal.WithConsumerOptions(kc.Options()...))
	jp.replicate = func(s *replicatorSink) error {
		opts := s.opts
		if q := a.cfg.Journal.QuarantineTopic; q != "" {
			opts = append(opts, journal.WithQuarantine(journal.QuarantineTo(cl, q)))
		}
		r, err := journal.NewReplicator(st, opts...)
		if err != nil {
			return err
		}
		if err := prometheus.WrapRegistererWith(prometheus.Labels{"pipeline": s.pipeline}, a.reg).Register(r.Collector()); err != nil {
			return fmt.Errorf("journal metrics: %w", err)
		}
		s.r.Store(r)
		return nil
	}
	for _, s := range jp.sinks {
		if err := jp.replicate(s); err != nil {
			return err
		}
	}
	return nil
}

// journalSink is the replicator sink of a `type = "journal"` pipeline.
func (a *App) journalSink(ctx context.Context, pc *config.Pipeline) (plugins.Sink, error) {
	jp, err := a.journalSetup(ctx)
	if err != nil {
		return nil, err
	}
	s := &replicatorSink{pipeline: pc.Name, opts: []journal.Option{journal.WithLogger(a.log.With("pipeline", pc.Name))}}
	jp.mu.Lock()
	defer jp.mu.Unlock()
	jp.sinks = append(jp.sinks, s)
	if jp.replicate != nil { // the store is open: built by Run (New)
		if err := jp.replicate(s); err != nil {
			return nil, err
		}
		go a.expire(s.r.Load())
	}
	return s, nil
}

// startJournal opens the journal store, serves the journal HTTP API on
// api and runs the expiry job of the replicators until Run's context is
// done.
func (a *App) startJournal(ctx context.Context, api *lateHandler) error {
	if a.cfg.Journal == nil {
		return nil
	}
	jp, err := a.journalSetup(ctx)
	if err != nil {
		return err
	}
	if err := a.openJournal(ctx, jp); err != nil {
		return err
	}
	api.set(journal.Handler(jp.j))
	a.journalCtx = ctx
	jp.mu.Lock()
	defer jp.mu.Unlock()
	for _, s := range jp.sinks {
		go a.expire(s.r.Load())
	}
	return nil
}

// expire runs r's expiry job until Run's context is done.
func (a *App) expire(r *journal.Replicator) {
	top, jp := a.top(), a.journal
	if err := r.RunExpiry(top.journalCtx, jp.j, jp.expiry); err != nil && top.journalCtx.Err() == nil {
		a.log.Error("journal expiry job stopped", "err", err)
	}
}
