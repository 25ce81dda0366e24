package app

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/config"
	"github.com/streamd/streamd/journal"
	"github.com/streamd/streamd/plugins"
)

// journalParts are the journal pieces shared by the replicator pipelines,
// the expiry job and the HTTP API: one store, one client.
type journalParts struct {
	store       *journal.Store
	client      *kgo.Client
	j           *journal.Journal
	replicators []*journal.Replicator
}

// journalSetup opens the [journal] store once.
func (a *App) journalSetup(ctx context.Context) (*journalParts, error) {
	if a.journal != nil {
		return a.journal, nil
	}
	jc := a.cfg.Journal
	if jc == nil || jc.Store == "" {
		return nil, fmt.Errorf("%s: [journal] store is not set", a.cfg.File)
	}
	loader := func(ctx context.Context, ref string) (plugins.Sink, error) {
		p, err := a.load(ctx, ref, a.pluginOpts(plugins.KindSink, "journal-store", config.PluginSettings{Config: jc.Config}, 0))
		if err != nil {
			return nil, err
		}
		s, ok := p.(plugins.Sink)
		if !ok {
			return nil, fmt.Errorf("journal store plugin %s is a %s, not a sink", p.Manifest().Name, p.Manifest().Kind)
		}
		return s, nil
	}
	dsn := jc.Store
	if len(dsn) > 7 && dsn[:7] == "sqlite:" {
		dsn = "sqlite:" + a.cfg.Resolve(dsn[7:])
	}
	st, err := journal.OpenStore(ctx, dsn, journal.WithSinkLoader(loader), journal.WithStoreLogger(a.log))
	if err != nil {
		return nil, fmt.Errorf("%s: journal.store: %w", a.cfg.File, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.cfg.Kafka.Brokers...), kgo.ClientID(a.cfg.Kafka.ClientID))
	if err != nil {
		st.Close()
		return nil, err
	}
	a.journal = &journalParts{store: st, client: cl, j: journal.New(cl, st)}
	a.closers = append(a.closers, func() error {
		a.journal.j.Close()
		cl.Close()
		return st.Close()
	})
	return a.journal, nil
}

// journalSink is the replicator sink of a `type = "journal"` pipeline.
func (a *App) journalSink(ctx context.Context, pc *config.Pipeline) (plugins.Sink, error) {
	jp, err := a.journalSetup(ctx)
	if err != nil {
		return nil, err
	}
	opts := []journal.Option{journal.WithLogger(a.log.With("pipeline", pc.Name))}
	if q := a.cfg.Journal.QuarantineTopic; q != "" {
		opts = append(opts, journal.WithQuarantine(journal.QuarantineTo(jp.client, q)))
	}
	r, err := journal.NewReplicator(jp.store, opts...)
	if err != nil {
		return nil, err
	}
	jp.replicators = append(jp.replicators, r)
	if err := prometheus.WrapRegistererWith(prometheus.Labels{"pipeline": pc.Name}, a.reg).Register(r.Collector()); err != nil {
		return nil, fmt.Errorf("journal metrics: %w", err)
	}
	return r, nil
}

// startJournal mounts the journal HTTP API and runs the expiry job of the
// replicators until ctx is done.
func (a *App) startJournal(ctx context.Context) error {
	if a.cfg.Journal == nil {
		return nil
	}
	jp, err := a.journalSetup(ctx)
	if err != nil {
		return err
	}
	a.Admin.Handle("/journal/", journal.Handler(jp.j))
	for _, r := range jp.replicators {
		go func() {
			if err := r.RunExpiry(ctx, jp.j, a.cfg.Journal.ExpiryInterval.Duration); err != nil && ctx.Err() == nil {
				a.log.Error("journal expiry job stopped", "err", err)
			}
		}()
	}
	return nil
}
