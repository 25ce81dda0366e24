// Package app assembles a streamd daemon from a config: the embedded broker,
// the pipelines with their plugins, and the admin server.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/internal/admin"
	"github.com/streamd/streamd/internal/config"
	"github.com/streamd/streamd/internal/console"
	"github.com/streamd/streamd/internal/embedded"
	"github.com/streamd/streamd/internal/generate"
	"github.com/streamd/streamd/internal/kafkaconf"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/pipeline/metrics"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/codecs"
)

// Opener loads a plugin from a reference such as "wasm:x.wasm" or
// "native:./bin" (plugins/load.Open).
type Opener func(ctx context.Context, ref string, opts plugins.Options) (plugins.Plugin, error)

// App is an assembled daemon.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	open    Opener
	stdout  io.Writer
	reg     *prometheus.Registry
	metrics *metrics.Metrics

	pipes   []*pipeline.Pipeline
	loaded  []plugins.Plugin
	closers []func() error
	broker  *embedded.Broker
	journal *journalParts
	// clusters are the Kafka clusters by config name ("" = [kafka]).
	clusters map[string]*kafka.Cluster
	// registries are the schema registry clients by [schema_registry] name.
	registries map[string]*sr.Client
	Admin      *admin.Server
	// AdminAddr is the address the admin server bound, once Run started it.
	AdminAddr string
	mu        sync.Mutex

	// console parts (console.go)
	parts   []*pipeParts
	console *console.Console
	adm     map[string]*kadm.Client // by cluster name
	bridge  *fluid.Bridge
}

// Logger returns a slog logger for the config's [log] section.
func Logger(c config.Log, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	o := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// Build loads every plugin and assembles every pipeline, without touching
// the network: `streamd lint` is Build then Close.
func Build(ctx context.Context, cfg *config.Config, log *slog.Logger, open Opener, stdout io.Writer) (*App, error) {
	a := &App{cfg: cfg, log: log, open: open, stdout: stdout, reg: prometheus.NewRegistry()}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.metrics = metrics.New(a.reg)
	a.newConsole()
	var errs []error
	for i := range cfg.Pipelines {
		p, err := a.buildPipeline(ctx, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.pipes = append(a.pipes, p)
	}
	if err := errors.Join(errs...); err != nil {
		a.Close()
		return nil, err
	}
	opts, err := adminOptions(cfg, log)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Admin = admin.New(a.reg, a.Pipelines, log, opts...)
	a.mountConsole()
	return a, nil
}

// Pipelines returns the assembled pipelines.
func (a *App) Pipelines() []*pipeline.Pipeline {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*pipeline.Pipeline(nil), a.pipes...)
}

// Logger returns the app's logger.
func (a *App) Logger() *slog.Logger { return a.log }

// Registry returns the Prometheus registry the app's metrics are in.
func (a *App) Registry() *prometheus.Registry { return a.reg }

// Plugins returns every plugin loaded for the pipelines.
func (a *App) Plugins() []plugins.Plugin { return a.loaded }

func (a *App) where(i int, part string) string {
	return fmt.Sprintf("%s: pipeline %q %s", a.cfg.File, a.cfg.Pipelines[i].Name, part)
}

// pluginRef turns a stage's path/plugin into a loader reference with paths
// resolved against the config file's folder.
func (a *App) pluginRef(typ, path, plugin string) string {
	ref := plugin
	if ref == "" {
		ref = path
	}
	kind, rest, ok := strings.Cut(ref, ":")
	if !ok || (kind != "wasm" && kind != "native") {
		kind, rest = typ, ref
		if kind != "native" {
			kind = "wasm"
		}
	}
	return kind + ":" + a.cfg.Resolve(rest)
}

// pluginOpts merges a plugin's settings with the [plugins] defaults; pool
// 0 means one instance per pipeline worker.
func (a *App) pluginOpts(kind plugins.Kind, name string, ps config.PluginSettings, workers int) plugins.Options {
	o := plugins.Options{
		Kind: kind, Config: ps.Config, Logger: a.log.With("stage", name), CacheDir: a.cfg.Plugins.CacheDir,
		MaxMemoryPages: a.cfg.Plugins.MaxMemoryPages, Timeout: a.cfg.Plugins.Timeout.Duration,
		Pool: ps.Pool, Checksum: ps.Checksum, Watch: a.cfg.Plugins.Watch.Duration,
		Clock: ps.Clock, DeterministicRandom: ps.Random != nil && !*ps.Random,
	}
	if o.Pool == 0 {
		o.Pool = workers
	}
	if ps.MaxMemoryPages != 0 {
		o.MaxMemoryPages = ps.MaxMemoryPages
	}
	if ps.Timeout.Duration != 0 {
		o.Timeout = ps.Timeout.Duration
	}
	if len(ps.Dirs) > 0 {
		o.Dirs = map[string]string{}
		for guest, host := range ps.Dirs {
			o.Dirs[guest] = a.cfg.Resolve(host)
		}
	}
	return o
}

func (a *App) load(ctx context.Context, ref string, o plugins.Options) (plugins.Plugin, error) {
	if a.open == nil {
		return nil, errors.New("plugins are not available in this build")
	}
	start := time.Now()
	p, err := a.open(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	a.log.Info("plugin loaded", "plugin", ref, "took", time.Since(start).Round(10*time.Microsecond))
	a.loaded = append(a.loaded, p)
	return p, nil
}

func (a *App) buildPipeline(ctx context.Context, i int) (*pipeline.Pipeline, error) {
	pc := &a.cfg.Pipelines[i]
	log := a.log.With("pipeline", pc.Name)
	src, err := a.buildSource(pc, log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.where(i, "source"), err)
	}
	var stages []pipeline.Stage
	for j := range pc.Transforms {
		st, err := a.buildStage(ctx, pc, j)
		if err != nil {
			src.Close()
			return nil, fmt.Errorf("%s: %w", a.where(i, fmt.Sprintf("transform[%d]", j)), err)
		}
		stages = append(stages, st)
	}
	sink, err := a.buildSink(ctx, pc)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("%s: %w", a.where(i, "sink"), err)
	}
	stages = a.observeStages(pc.Name, stages)
	opts := a.pipelineOptions(pc, stages)
	switch pc.Errors.Policy {
	case "dlq":
		kc, err := a.kafkaCluster(pc.Errors.DLQCluster)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.where(i, "errors.dlq_cluster"), err)
		}
		dlq, err := kafka.NewSink(kafka.SinkConfig{Cluster: kc, Topic: pc.Errors.DLQTopic,
			Partitions: a.partitions(pc.Errors.DLQCluster), MaxRecordBytes: int32(pc.Sink.MaxRecordBytes), Logger: a.log.With("pipeline", pc.Name, "sink", "dlq")})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.where(i, "errors.dlq_topic"), err)
		}
		a.closers = append(a.closers, dlq.Close)
		opts = append(opts, pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq))
	case "drop":
		opts = append(opts, pipeline.WithErrorPolicy(pipeline.PolicyDrop, nil))
	default:
		opts = append(opts, pipeline.WithErrorPolicy(pipeline.PolicyStop, nil))
	}
	p := pipeline.New(pc.Name, src, sink, append(opts, pipeline.WithObserver(a.metrics))...)
	a.keepParts(pc, p, stages, sink, opts)
	return p, nil
}

// pipelineOptions are the options of pipeline pc with stages, all but its
// error policy and the metrics observer: Build's, BuildTest's and the
// console replay's.
func (a *App) pipelineOptions(pc *config.Pipeline, stages []pipeline.Stage) []pipeline.Option {
	return []pipeline.Option{
		pipeline.WithStages(stages...),
		pipeline.WithBatch(pc.Batch.MaxRecords, pc.Batch.MaxBytes, none(pc.Batch.Linger.Duration)),
		pipeline.WithWorkers(pc.Workers),
		pipeline.WithMaxInFlight(pc.MaxInFlight),
		pipeline.WithRetry(pc.Errors.RetryInitial.Duration, pc.Errors.RetryMax.Duration, pc.Errors.RetryAttempts),
		pipeline.WithShutdownTimeout(none(pc.ShutdownTimeout.Duration)),
		pipeline.WithCommitInterval(none(pc.CommitInterval.Duration)),
		pipeline.WithStallTimeout(none(pc.StallTimeout.Duration)),
		pipeline.WithLogger(a.log),
	}
}

// none maps a config duration of "0s" (no linger, abandon at once, commit
// after every batch, no stall reports) to the pipeline options' "none",
// a negative duration: to the options 0 means the default.
func none(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func (a *App) buildSource(pc *config.Pipeline, log *slog.Logger) (pipeline.Source, error) {
	s := &pc.Source
	switch s.Type {
	case "kafka":
		if s.Fluid != nil {
			return a.newFluidSource(pc, log)
		}
		kc, err := a.kafkaCluster(s.Cluster)
		if err != nil {
			return nil, err
		}
		topics := s.Topics
		if s.TopicsRegex != "" {
			topics = []string{s.TopicsRegex}
		}
		instanceID, instanceDir := s.InstanceID, ""
		if instanceID == config.AutoInstanceID {
			instanceID, instanceDir = "", filepath.Join(a.cfg.DataDir, "instances")
		}
		return kafka.NewSource(kafka.SourceConfig{
			Cluster: kc, Topics: topics, TopicsRegex: s.TopicsRegex != "", Group: s.Group,
			Latest: s.Start == "latest", Partitions: a.partitions(s.Cluster), Logger: log,
			InstanceID: instanceID, InstanceDir: instanceDir, SessionTimeout: s.SessionTimeout.Duration, Opts: kafkaconf.SourceOpts(s),
		})
	case "generate":
		return generate.NewSource(s.Rate, s.Count, s.Keys), nil
	case "file":
		return pipeline.NewFileSource(a.cfg.Resolve(s.Path))
	}
	return nil, fmt.Errorf("unknown source type %q", s.Type)
}

func (a *App) buildStage(ctx context.Context, pc *config.Pipeline, j int) (pipeline.Stage, error) {
	s := &pc.Transforms[j]
	if s.Type == "schema" {
		return a.schemaStage(pc, s)
	}
	if s.Type == "codec" {
		var c plugins.Codec
		name := s.Codec
		if s.Codec != "" {
			bc, err := codecs.New(s.Codec, s.Level)
			if err != nil {
				return pipeline.Stage{}, err
			}
			c = bc
		} else {
			p, err := a.load(ctx, a.pluginRef("wasm", s.Path, s.Plugin), a.pluginOpts(plugins.KindCodec, s.Name, s.PluginSettings, pc.Workers))
			if err != nil {
				return pipeline.Stage{}, err
			}
			pc, ok := p.(plugins.Codec)
			if !ok {
				return pipeline.Stage{}, fmt.Errorf("plugin %s is a %s, not a codec", p.Manifest().Name, p.Manifest().Kind)
			}
			c, name = pc, p.Manifest().Name
		}
		t := pipeline.DecodeStage(c, name)
		if s.Mode == "encode" {
			t = pipeline.EncodeStage(c, name)
		}
		return pipeline.Stage{Name: s.Name, Transformer: t, Plugin: name}, nil
	}
	p, err := a.load(ctx, a.pluginRef(s.Type, s.Path, s.Plugin), a.pluginOpts(plugins.KindTransform, s.Name, s.PluginSettings, pc.Workers))
	if err != nil {
		return pipeline.Stage{}, err
	}
	t, ok := p.(plugins.Transformer)
	if !ok {
		return pipeline.Stage{}, fmt.Errorf("plugin %s is a %s, not a transform", p.Manifest().Name, p.Manifest().Kind)
	}
	return pipeline.Stage{Name: s.Name, Transformer: t, Plugin: p.Manifest().Name}, nil
}

func (a *App) buildSink(ctx context.Context, pc *config.Pipeline) (plugins.Sink, error) {
	k := &pc.Sink
	switch k.Type {
	case "kafka":
		kc, err := a.kafkaCluster(k.Cluster)
		if err != nil {
			return nil, err
		}
		s, err := kafka.NewSink(kafka.SinkConfig{
			Cluster: kc, Topic: k.Topic, Compression: k.Compression,
			Level: k.CompressionLevel, SamePartition: k.Partition == "same", Partitions: a.partitions(k.Cluster),
			MaxRecordBytes: int32(k.MaxRecordBytes), Logger: a.log.With("pipeline", pc.Name, "sink", "kafka"), Opts: kafkaconf.SinkOpts(k),
		})
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, s.Close)
		return s, nil
	case "file":
		path := a.cfg.Resolve(k.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		s, err := pipeline.NewFileSink(path)
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, s.Close)
		return s, nil
	case "stdout":
		return pipeline.NewWriterSink(a.stdout), nil
	case "drop":
		return pipeline.DropSink{}, nil
	case "wasm", "native":
		p, err := a.load(ctx, a.pluginRef(k.Type, "", k.Plugin), a.pluginOpts(plugins.KindSink, pc.Name+"-sink", k.PluginSettings, pc.Workers))
		if err != nil {
			return nil, err
		}
		s, ok := p.(plugins.Sink)
		if !ok {
			return nil, fmt.Errorf("plugin %s is a %s, not a sink", p.Manifest().Name, p.Manifest().Kind)
		}
		return s, nil
	case "journal":
		return a.journalSink(ctx, pc)
	}
	return nil, fmt.Errorf("unknown sink type %q", k.Type)
}

// Run starts the embedded broker (if configured) and the admin server, and
// runs every pipeline until ctx is done or all of them have ended. It
// returns an error if any pipeline failed.
func (a *App) Run(ctx context.Context) error {
	if e := a.cfg.Kafka.Embedded; e != nil {
		b, err := embedded.Start(embedded.Config{Listen: e.Listen, DataDir: e.DataDir, SyncWrites: e.SyncWrites, Partitions: a.cfg.Kafka.Partitions})
		if err != nil {
			return err
		}
		a.broker = b
		a.log.Info("embedded broker started", "listen", b.ListenAddrs(), "data_dir", e.DataDir)
	}
	if err := a.startJournal(ctx); err != nil {
		return err
	}
	if err := a.startFluid(ctx); err != nil {
		return err
	}
	if a.cfg.Admin.Listen != "" {
		addr, err := a.Admin.Start(a.cfg.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin listen %s: %w", a.cfg.Admin.Listen, err)
		}
		a.AdminAddr = addr
		a.log.Info("admin server listening", "addr", addr, "tls", a.Admin.TLS(), "auth", a.cfg.Admin.Auth != nil)
		if a.console != nil {
			a.console.Start()
			a.log.Info("console", "url", a.consoleURL())
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(a.pipes))
	for i, p := range a.pipes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Run(ctx); err != nil {
				errs[i] = fmt.Errorf("pipeline %s: %w", p.Name(), err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// A daemon that also serves the fluid bridge or the journal API keeps
	// serving after its pipelines (if any) end, until it is stopped.
	if a.cfg.Fluid != nil || (a.cfg.Journal != nil && a.cfg.Admin.Listen != "") || len(a.pipes) == 0 {
		<-ctx.Done()
	}
	return nil
}

// Close releases plugins, clients, the admin server and the broker.
func (a *App) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if a.console != nil {
		a.console.Close() // ends its event streams, which Shutdown would wait for
	}
	if a.Admin != nil {
		a.Admin.Shutdown(ctx)
	}
	for _, c := range a.closers {
		if err := c(); err != nil {
			a.log.Warn("close", "err", err)
		}
	}
	for _, p := range a.loaded {
		if err := p.Close(ctx); err != nil {
			a.log.Warn("close plugin", "plugin", p.Manifest().Name, "err", err)
		}
	}
	if a.broker != nil {
		a.broker.Close()
	}
}
