package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/fluid/fluidsource"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/kafkaconf"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
)

// startFluid starts the Fluid Messaging bridge when [fluid] is
// configured, and serves it on api (the admin server's /fluid/).
func (a *App) startFluid(ctx context.Context, api *lateHandler) error {
	fc := a.cfg.Fluid
	if fc == nil {
		return nil
	}
	if a.cfg.Admin.Listen == "" {
		return fmt.Errorf("%s: [fluid] needs [admin] listen: the bridge is served on the admin address", a.cfg.File)
	}
	meta, reg, err := a.fluidMetadata(ctx, fc)
	if err != nil {
		return fmt.Errorf("%s: [fluid]: %w", a.cfg.File, err)
	}
	kc, err := a.kafkaCluster("")
	if err != nil {
		return fmt.Errorf("%s: [fluid]: %w", a.cfg.File, err)
	}
	opts := []fluid.Option{
		fluid.WithMetadata(meta),
		fluid.WithLoader(a.open),
		fluid.WithPluginOptions(a.pluginOpts(plugins.KindTransform, "fluid-downgrade", config.PluginSettings{}, 0)),
		fluid.WithBrokers(kc.Seeds...),
		fluid.WithKafkaOptions(kc.Options()...),
		fluid.WithStateTopic(fc.StateTopic),
		fluid.WithLogger(a.log.With("component", "fluid")),
	}
	if reg != nil {
		opts = append(opts, fluid.WithRegistry(reg))
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
	api.set(b.Handler())
	a.mu.Lock()
	a.bridge = b
	a.mu.Unlock()
	a.closers = append(a.closers, b.Close)
	return nil
}

// fluidMetadata loads [fluid] metadata; a manifest may name subjects of
// [fluid] registry (or [schema_registry]) instead of schema files. reg is
// that registry's client, nil without one.
func (a *App) fluidMetadata(ctx context.Context, fc *config.Fluid) (m *fluid.Metadata, reg fluid.Registry, err error) {
	var src fluid.SchemaSource
	if a.cfg.Registry(fc.Registry) != nil {
		cl, err := a.registryClient(fc.Registry)
		if err != nil {
			return nil, nil, err
		}
		reg, src = cl, fluid.RegistrySource(ctx, cl)
	}
	m, err = fluid.LoadMetadataFrom(fc.Metadata, src)
	return m, reg, err
}

// fluidSource is a kafka source that is a Fluid Messaging consumer
// (fluid/fluidsource). It is created on Ready, once the bridge, possibly
// this process's own admin server, answers.
type fluidSource struct {
	cfg    fluid.ConsumerConfig
	bridge func() string
	mu     sync.Mutex
	s      *fluidsource.Source
}

func (a *App) newFluidSource(pc *config.Pipeline, log *slog.Logger) (pipeline.Source, error) {
	s := &pc.Source
	if len(s.Topics) != 1 {
		return nil, errors.New("a fluid consumer reads exactly one topic")
	}
	kc, err := a.kafkaCluster(s.Cluster)
	if err != nil {
		return nil, err
	}
	kopts := append(kc.Options(), kafkaconf.SourceOpts(s)...)
	if s.InstanceID != "" && s.InstanceID != config.AutoInstanceID { // auto: not for fluid consumers yet
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
		// This process's own admin server, called in process: no
		// network, and no token or TLS of [admin] to present.
		return "http://streamd.in-process"
	}
	if s.Fluid.Bridge == "" {
		fs.cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return a.Admin.InProcess().RoundTrip(r)
		})}
	} else if tok := s.Fluid.BridgeToken; !tok.IsZero() {
		// Another process's bridge behind [admin.auth]: the token, read
		// at each request (a ${file:} one may be rotated).
		fs.cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			v, err := tok.Value()
			if err != nil {
				return nil, fmt.Errorf("fluid bridge_token: %w", err)
			}
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+v)
			return http.DefaultTransport.RoundTrip(r)
		})}
	}
	return fs, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (s *fluidSource) source() *fluidsource.Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s
}

// Ready implements pipeline.Readier: it creates the consumer, which
// registers the group with the bridge.
func (s *fluidSource) Ready(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		return nil
	}
	cfg := s.cfg
	cfg.BridgeURL = s.bridge()
	src, err := fluidsource.New(ctx, cfg)
	if err != nil {
		return fmt.Errorf("fluid consumer via %s: %w", cfg.BridgeURL, err)
	}
	s.s = src
	return nil
}

// Fetch implements pipeline.Source.
func (s *fluidSource) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	return s.source().Fetch(ctx)
}

// Ack implements pipeline.Source.
func (s *fluidSource) Ack(msgs []pipeline.Msg) { s.source().Ack(msgs) }

// Live implements pipeline.Liveness.
func (s *fluidSource) Live(m *pipeline.Msg) bool { return s.source().Live(m) }

// Commit implements pipeline.Source.
func (s *fluidSource) Commit(ctx context.Context) error {
	if src := s.source(); src != nil {
		return src.Commit(ctx)
	}
	return nil
}

// Close implements pipeline.Source.
func (s *fluidSource) Close(ctx context.Context) error {
	if src := s.source(); src != nil {
		return src.Close(ctx)
	}
	return nil
}
