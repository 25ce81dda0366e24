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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/internal/daemon/admin"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/console"
	"github.com/streamd/streamd/internal/daemon/embedded"
	"github.com/streamd/streamd/internal/daemon/kafkaconf"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/file"
	"github.com/streamd/streamd/pipeline/generate"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/pipeline/metrics"
	"github.com/streamd/streamd/pipeline/stdin"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/codecs"
)

// App is an assembled daemon.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	open    plugins.OpenFunc
	stdout  io.Writer
	reg     *prometheus.Registry
	metrics *metrics.Metrics

	// cur is the unit being built by this App, a builder derived from the
	// daemon's (reload.go: derive); root is that daemon's App.
	cur  *unit
	root *App
	// cl are the Kafka clusters and schema registry clients of the
	// running config.
	cl *clientCache
	// loadTimeout bounds loading one plugin.
	loadTimeout time.Duration
	// wrapSink, when set (by tests), wraps every pipeline's sink as it is
	// built: a fault injector.
	wrapSink func(pipeline string, s plugins.Sink) plugins.Sink
	// loaded and closers are the app's own plugins and clients (the
	// journal store, the fluid bridge), closed last.
	loaded  []plugins.Plugin
	closers []func(context.Context) error
	broker  *embedded.Broker
	// brokerp is broker for the [kafka] cluster's StorageErr, which runs
	// on other goroutines (Status, a sink's errors).
	brokerp atomic.Pointer[embedded.Broker]
	journal *journalParts
	// journalCtx is Run's context, which the journal's expiry jobs run
	// under (journal.go).
	journalCtx context.Context
	Admin      *admin.Server
	// AdminAddr is the address the admin server bound, once Run started it.
	AdminAddr string

	// starting says what Run is starting while /readyz answers 503 for it
	// (lifecycle.go); "" once started.
	starting atomic.Pointer[string]
	// The lifecycle (lifecycle.go), under mu: Run's phase and context, the
	// units of the running config in its order, the operations in line
	// and the one running.
	mu      sync.Mutex
	phase   phase
	runCtx  context.Context
	wake    chan struct{}
	units   []*unit
	queue   []*op
	current *op
	working bool // a runOps goroutine runs
	pauseMu sync.Mutex

	reloads     *reloadMetrics
	lastReload  *ReloadResult
	reloadStart func()
	reloadEnd   func(error)

	// autoRestarts counts automatic restarts (autorestart.go).
	autoRestarts *prometheus.CounterVec

	// console parts (console.go)
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

// New assembles a daemon from cfg for Run without building its pipelines:
// Run builds them once the admin listener is open, all at once (see
// lifecycle.go), so that /healthz answers while plugins load and a
// pipeline whose plugins do not load fails alone. New checks what needs
// no plugin and no network: the admin server's TLS and token files.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, open plugins.OpenFunc, stdout io.Writer) (*App, error) {
	a := &App{cfg: cfg, log: log, open: open, stdout: stdout, reg: prometheus.NewRegistry(), cl: newClientCache(),
		loadTimeout: loadTimeout(cfg), wake: make(chan struct{}, 1)}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.metrics = metrics.New(a.reg)
	a.reloads = newReloadMetrics(a.reg)
	a.autoRestarts = newRestartMetric(a.reg)
	a.newConsole()
	for i := range cfg.Pipelines {
		a.units = append(a.units, newUnit(cfg, i))
	}
	opts, err := adminOptions(cfg, log)
	if err != nil {
		return nil, errors.Join(err, a.Close(context.WithoutCancel(ctx)))
	}
	a.Admin = admin.New(a.reg, a.Pipelines, log, append(opts, admin.WithStatuses(a.Statuses), admin.WithStarting(a.startingWhat))...)
	a.mountConsole()
	a.mountAPI()
	return a, nil
}

// Build is New, then every pipeline built with its plugins loaded (all at
// once, each plugin within its load timeout), without touching the
// network: `streamd lint` is Build then Close. It fails if any pipeline
// fails to build, naming each.
func Build(ctx context.Context, cfg *config.Config, log *slog.Logger, open plugins.OpenFunc, stdout io.Writer) (*App, error) {
	a, err := New(ctx, cfg, log, open, stdout)
	if err != nil {
		return nil, err
	}
	// The journal's parts are the app's, shared by its pipelines: set up
	// before they build.
	if slices.ContainsFunc(cfg.Pipelines, func(p config.Pipeline) bool { return p.Sink.Type == "journal" }) {
		if _, err := a.journalSetup(ctx); err != nil {
			return nil, errors.Join(err, a.Close(context.WithoutCancel(ctx)))
		}
	}
	if err := errors.Join(a.buildAll(ctx, a.units, a.cl)...); err != nil {
		return nil, errors.Join(err, a.Close(context.WithoutCancel(ctx)))
	}
	for _, u := range a.units {
		a.make(u)
	}
	return a, nil
}

// Pipelines returns the pipelines of the running config that are built,
// in its order (Statuses has every one, loading ones included).
func (a *App) Pipelines() []*pipeline.Pipeline {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*pipeline.Pipeline, 0, len(a.units))
	for _, u := range a.units {
		if u.p != nil {
			out = append(out, u.p)
		}
	}
	return out
}

// Logger returns the app's logger.
func (a *App) Logger() *slog.Logger { return a.log }

// Registry returns the Prometheus registry the app's metrics are in.
func (a *App) Registry() *prometheus.Registry { return a.reg }

// Plugins returns every plugin loaded for the pipelines and the app.
func (a *App) Plugins() []plugins.Plugin {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]plugins.Plugin(nil), a.loaded...)
	for _, u := range a.units {
		if u.built {
			out = append(out, u.loaded...)
		}
	}
	return out
}

// where names a part of pipeline i at its FILE:LINE.
func (a *App) where(i int, part string) string {
	at := a.cfg.File
	if ln := a.cfg.Line(fmt.Sprintf("pipeline[%d].%s", i, part)); ln > 0 {
		at += ":" + strconv.Itoa(ln)
	}
	return fmt.Sprintf("%s: pipeline %q %s", at, a.cfg.Pipelines[i].Name, part)
}

// addCloser adds c to what is closed with the unit being built (or with
// the app): with what is left of the pipeline's shutdown deadline.
func (a *App) addCloser(c func(context.Context) error) {
	if a.cur != nil {
		a.cur.closers = append(a.cur.closers, c)
		return
	}
	a.closers = append(a.closers, c)
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
		Kind:    kind,
		Config:  ps.Config,
		Logger:  a.log.With("stage", name),
		Timeout: a.cfg.Plugins.Timeout.Duration,
		Pool:    ps.Pool,
		Wasm: plugins.WasmOptions{CacheDir: a.cfg.Plugins.CacheDir, MaxMemoryPages: a.cfg.Plugins.MaxMemoryPages, Watch: a.cfg.Plugins.Watch.Duration, Clock: ps.Clock, DeterministicRandom: ps.Random != nil && !*ps.Random,
			MaxTableElements: a.cfg.Plugins.MaxTableElements, MaxModuleBytes: a.cfg.Plugins.MaxModuleBytes, CompileTimeout: a.cfg.Plugins.CompileTimeout.Duration,
			MaxLogLineBytes: a.cfg.Plugins.MaxLogLineBytes, MaxLogLinesPerRecord: a.cfg.Plugins.MaxLogLinesPerRecord, MaxLogBytesPerRecord: a.cfg.Plugins.MaxLogBytesPerRecord},
		Native: plugins.NativeOptions{Checksum: ps.Checksum},
	}
	if o.Pool == 0 {
		o.Pool = workers
	}
	if ps.MaxMemoryPages != 0 {
		o.Wasm.MaxMemoryPages = ps.MaxMemoryPages
	}
	if ps.MaxTableElements != 0 {
		o.Wasm.MaxTableElements = ps.MaxTableElements
	}
	if ps.Timeout.Duration != 0 {
		o.Timeout = ps.Timeout.Duration
	}
	if len(ps.Dirs) > 0 {
		o.Wasm.Dirs = map[string]string{}
		for guest, host := range ps.Dirs {
			o.Wasm.Dirs[guest] = a.cfg.Resolve(host)
		}
	}
	return o
}

func (a *App) load(ctx context.Context, ref string, o plugins.Options) (plugins.Plugin, error) {
	if a.open == nil {
		return nil, errors.New("plugins are not available in this build")
	}
	start := time.Now()
	p, err := loadWithin(ctx, a.open, ref, o, a.loadTimeout)
	if err != nil {
		return nil, err
	}
	a.log.Info("plugin loaded", "plugin", ref, "took", time.Since(start).Round(10*time.Microsecond))
	if a.cur != nil {
		a.cur.loaded = append(a.cur.loaded, p)
	} else {
		a.loaded = append(a.loaded, p)
	}
	return p, nil
}

// loadWithin opens ref with a context that ends after d (none if d is not
// positive), and stops waiting for the loader then, whether or not the
// loader heeds its context: a plugin that loads too late is closed when it
// comes.
func loadWithin(ctx context.Context, open plugins.OpenFunc, ref string, o plugins.Options, d time.Duration) (plugins.Plugin, error) {
	if d <= 0 {
		return open(ctx, ref, o)
	}
	lctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	type loaded struct {
		p   plugins.Plugin
		err error
	}
	ch := make(chan loaded, 1)
	go func() {
		p, err := open(lctx, ref, o)
		ch <- loaded{p, err}
	}()
	select {
	case l := <-ch:
		if l.err != nil && lctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("plugin %s did not load within %v (plugins.load_timeout): %w", ref, d, l.err)
		}
		return l.p, l.err
	case <-lctx.Done():
		go func() {
			if l := <-ch; l.p != nil {
				_ = l.p.Close(context.Background()) // came too late
			}
		}()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("plugin %s did not load within %v (plugins.load_timeout)", ref, d)
	}
}

// buildPipeline builds pipeline i's parts into a.cur.
func (a *App) buildPipeline(ctx context.Context, i int) error {
	u := a.cur
	pc := &a.cfg.Pipelines[i]
	log := a.log.With("pipeline", pc.Name)
	src, err := a.buildSource(pc, log)
	if err != nil {
		return fmt.Errorf("%s: %w", a.where(i, "source"), err)
	}
	u.src = src
	var stages []pipeline.Stage
	for j := range pc.Transforms {
		st, err := a.buildStage(ctx, pc, j)
		if err != nil {
			return fmt.Errorf("%s: %w", a.where(i, fmt.Sprintf("transform[%d]", j)), err)
		}
		stages = append(stages, st)
	}
	sink, err := a.buildSink(ctx, pc, src)
	if err != nil {
		return fmt.Errorf("%s: %w", a.where(i, "sink"), err)
	}
	if w := a.top().wrapSink; w != nil {
		sink = w(pc.Name, sink)
	}
	u.sink = sink
	opts := a.pipelineOptions(pc, stages)
	if obs := a.consoleObserver(pc.Name, stages); obs != nil {
		opts = append(opts, pipeline.WithObserver(obs))
	}
	switch pc.Errors.Policy {
	case "dlq":
		kc, err := a.kafkaCluster(pc.Errors.DLQCluster)
		if err != nil {
			return fmt.Errorf("%s: %w", a.where(i, "errors.dlq_cluster"), err)
		}
		dlq, err := kafka.NewSink(kafka.SinkConfig{Cluster: kc, Topic: pc.Errors.DLQTopic, Transactional: transactional(src),
			Partitions: a.partitions(pc.Errors.DLQCluster), MaxRecordBytes: int32(pc.Sink.MaxRecordBytes), Logger: a.log.With("pipeline", pc.Name, "sink", "dlq")})
		if err != nil {
			return fmt.Errorf("%s: %w", a.where(i, "errors.dlq_topic"), err)
		}
		a.addCloser(dlq.Close)
		opts = append(opts, pipeline.WithErrorPolicy(pipeline.PolicyDLQ, a.guardReplays(pc, dlq)))
	case "drop":
		opts = append(opts, pipeline.WithErrorPolicy(pipeline.PolicyDrop, nil))
	default:
		opts = append(opts, pipeline.WithErrorPolicy(pipeline.PolicyStop, nil))
	}
	u.opts = opts
	a.keepParts(pc, stages, sink, opts)
	return nil
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
		pipeline.WithTransactions(pc.Transaction.MaxRecords, pc.Transaction.Interval.Duration),
		pipeline.WithLogger(a.log),
		pipeline.WithPaused(pc.Paused),
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
			Transactions: transactions(pc),
		})
	case "generate":
		return generate.NewSource(s.Rate, s.Count, s.Keys), nil
	case "file":
		return file.NewSource(a.cfg.Resolve(s.Path))
	case "stdin":
		return stdin.NewSource(), nil
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
	o := a.pluginOpts(plugins.KindTransform, s.Name, s.PluginSettings, pc.Workers)
	if err := a.foreignOpts(&o, pc, s); err != nil {
		return pipeline.Stage{}, err
	}
	p, err := a.load(ctx, a.pluginRef(s.Type, s.Path, s.Plugin), o)
	if err != nil {
		return pipeline.Stage{}, err
	}
	t, ok := p.(plugins.Transformer)
	if !ok {
		return pipeline.Stage{}, fmt.Errorf("plugin %s is a %s, not a transform", p.Manifest().Name, p.Manifest().Kind)
	}
	return pipeline.Stage{Name: s.Name, Transformer: t, Plugin: p.Manifest().Name}, nil
}

func (a *App) buildSink(ctx context.Context, pc *config.Pipeline, src pipeline.Source) (plugins.Sink, error) {
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
			Transactional: transactional(src),
		})
		if err != nil {
			return nil, err
		}
		a.addCloser(s.Close)
		return s, nil
	case "file":
		path := a.cfg.Resolve(k.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		s, err := file.NewSink(path)
		if err != nil {
			return nil, err
		}
		a.addCloser(s.Close)
		return s, nil
	case "stdout":
		return file.NewWriterSink(a.stdout), nil
	case "drop":
		return file.DropSink{}, nil
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

// Close releases plugins, clients, the admin server and the broker, and
// returns what failed to close. ctx bounds closing the app's own parts (in
// 10 s if ctx has no deadline); each pipeline's parts close by that
// pipeline's shutdown deadline (see unit.closeContext).
func (a *App) Close(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, closeTimeout)
		defer cancel()
	}
	var errs []error
	if a.console != nil {
		// Ends its event streams, which Shutdown would wait for.
		errs = append(errs, a.console.Close(ctx))
	}
	if a.Admin != nil {
		if err := a.Admin.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("admin server shutdown: %w", err))
		}
	}
	a.mu.Lock()
	units := a.units
	a.units = nil
	a.mu.Unlock()
	// Every unit at once, each by its pipeline's shutdown deadline.
	var wg sync.WaitGroup
	uerrs := make([]error, len(units))
	for i, u := range units {
		a.mu.Lock()
		p, unrun := u.p, u.built && !u.ran
		a.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			uctx, cancel := u.closeContext(p)
			defer cancel()
			var err error
			if unrun && u.src != nil {
				err = u.src.Close(uctx) // never run: the pipeline did not close it
			}
			if err := errors.Join(err, u.release(uctx)); err != nil {
				uerrs[i] = fmt.Errorf("pipeline %s: %w", u.name, err)
			}
		}()
	}
	wg.Wait()
	errs = append(errs, uerrs...)
	errs = append(errs, closeAll(ctx, withPlugins(a.closers, a.loaded)))
	if a.broker != nil {
		a.broker.Close()
	}
	return errors.Join(errs...)
}
