package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/internal/config"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// startFluid starts the Fluid Messaging bridge on the admin server when
// [fluid] is configured.
func (a *App) startFluid(ctx context.Context) error {
	fc := a.cfg.Fluid
	if fc == nil {
		return nil
	}
	if a.cfg.Admin.Listen == "" {
		return fmt.Errorf("%s: [fluid] needs [admin] listen: the bridge is served on the admin address", a.cfg.File)
	}
	opts := []fluid.Option{
		fluid.WithMetadataDir(fc.Metadata),
		fluid.WithLoader(fluid.Loader(a.open)),
		fluid.WithPluginOptions(a.pluginOpts(plugins.KindTransform, "fluid-downgrade", config.PluginSettings{}, 0)),
		fluid.WithBrokers(a.cfg.Kafka.Brokers...),
		fluid.WithStateTopic(fc.StateTopic),
		fluid.WithLogger(a.log.With("component", "fluid")),
	}
	if fc.BaselineVersion > 0 {
		opts = append(opts, fluid.WithBaselineVersion(fc.BaselineVersion))
	}
	if fc.TopicSuffix != "" {
		opts = append(opts, fluid.WithTopicSuffix(fc.TopicSuffix))
	}
	b, err := fluid.NewBridge(ctx, opts...)
	if err != nil {
		return fmt.Errorf("%s: [fluid]: %w", a.cfg.File, err)
	}
	a.Admin.Handle("/fluid/", b.Handler())
	a.closers = append(a.closers, func() error {
		cctx, cancel := context.WithTimeout(context.Background(), 10e9)
		defer cancel()
		return b.Close(cctx)
	})
	return nil
}

// fluidSource is a kafka source that is a Fluid Messaging consumer. The
// consumer is created on Ready, once the bridge (possibly this process's
// own admin server) answers.
type fluidSource struct {
	cfg    fluid.ConsumerConfig
	bridge func() string
	mu     sync.Mutex // guards c
	c      *fluid.Consumer
	// call serialises every call into c: a fluid.Consumer is not safe for
	// concurrent use, and the pipeline fetches and acknowledges from
	// different goroutines. Polls are bounded so acknowledgements wait at
	// most one poll.
	call sync.Mutex
}

func (a *App) newFluidSource(pc *config.Pipeline, log *slog.Logger) (pipeline.Source, error) {
	s := &pc.Source
	if len(s.Topics) != 1 {
		return nil, errors.New("a fluid consumer reads exactly one topic")
	}
	kopts := []kgo.Opt{kgo.SeedBrokers(a.cfg.Kafka.Brokers...), kgo.ClientID(a.cfg.Kafka.ClientID)}
	if s.InstanceID != "" {
		kopts = append(kopts, kgo.InstanceID(s.InstanceID))
	}
	if s.SessionTimeout.Duration > 0 {
		kopts = append(kopts, kgo.SessionTimeout(s.SessionTimeout.Duration))
	}
	baseline := 0
	if a.cfg.Fluid != nil {
		baseline = a.cfg.Fluid.BaselineVersion
	}
	fs := &fluidSource{cfg: fluid.ConsumerConfig{
		Topic: s.Topics[0], Group: s.Group, CompatibleVersion: s.Fluid.CompatibleVersion,
		BaselineVersion: baseline, KafkaOptions: kopts, Logger: log,
	}}
	fs.bridge = func() string {
		if s.Fluid.Bridge != "" {
			return s.Fluid.Bridge
		}
		if a.AdminAddr != "" {
			return "http://" + a.AdminAddr
		}
		return "http://" + a.cfg.Admin.Listen
	}
	return fs, nil
}

func (s *fluidSource) consumer() *fluid.Consumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

// Ready implements pipeline.Readier: it creates the consumer, which
// registers the group with the bridge.
func (s *fluidSource) Ready(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		return nil
	}
	cfg := s.cfg
	cfg.BridgeURL = s.bridge()
	c, err := fluid.NewConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("fluid consumer via %s: %w", cfg.BridgeURL, err)
	}
	s.c = c
	return nil
}

func (s *fluidSource) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	c := s.consumer()
	if c == nil {
		if err := s.Ready(ctx); err != nil {
			return nil, err
		}
		c = s.consumer()
	}
	pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	s.call.Lock()
	recs, err := c.Poll(pctx)
	s.call.Unlock()
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, nil
		}
		return nil, err
	}
	msgs := make([]pipeline.Msg, len(recs))
	for i := range recs {
		msgs[i].Record = recs[i]
	}
	return msgs, nil
}

func (s *fluidSource) Ack(msgs []pipeline.Msg) {
	recs := make([]record.Record, len(msgs))
	for i := range msgs {
		recs[i] = msgs[i].Record
	}
	s.call.Lock()
	defer s.call.Unlock()
	s.consumer().Ack(recs)
}

func (s *fluidSource) Live(m *pipeline.Msg) bool {
	s.call.Lock()
	defer s.call.Unlock()
	return s.consumer().Live(&m.Record)
}

func (s *fluidSource) Commit(ctx context.Context) error {
	if c := s.consumer(); c != nil {
		s.call.Lock()
		defer s.call.Unlock()
		return c.Commit(ctx)
	}
	return nil
}

func (s *fluidSource) Close() {
	if c := s.consumer(); c != nil {
		c.Close()
	}
}
