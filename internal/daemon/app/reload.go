package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/plugins"
)

// effective is what a pipeline's behaviour depends on: its own table and
// the sections its parts are built from. A reload restarts a pipeline
// whose effective config changed and leaves every other one alone.
// Paused is not part of it: a reload that flips it pauses or resumes.
type effective struct {
	Pipeline config.Pipeline
	Kafka    config.Kafka
	Plugins  config.Plugins
	DataDir  string
	Registry *config.SchemaRegistries // only for pipelines with schema stages
}

func effectiveOf(c *config.Config, i int) effective {
	e := effective{Pipeline: c.Pipelines[i], Kafka: c.Kafka, Plugins: c.Plugins, DataDir: c.DataDir}
	e.Pipeline.Paused = false
	e.Kafka.Embedded = nil // restart-only
	for _, t := range e.Pipeline.Transforms {
		if t.Type == "schema" {
			e.Registry = c.SchemaRegistry
		}
	}
	return e
}

// equal compares with reflect.DeepEqual, not by printing: secrets count
// too, and are never formatted.
func (e effective) equal(o effective) bool { return reflect.DeepEqual(e, o) }

// restartOnly are the sections a running daemon cannot change: a reload
// reports a change to them and keeps the running values.
func restartOnly(old, new *config.Config) []string {
	var out []string
	diff := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			out = append(out, name)
		}
	}
	diff("admin", old.Admin, new.Admin)
	diff("console", old.Console, new.Console)
	diff("kafka.embedded", old.Kafka.Embedded, new.Kafka.Embedded)
	diff("log", old.Log, new.Log)
	diff("journal", old.Journal, new.Journal)
	diff("fluid", old.Fluid, new.Fluid)
	return out
}

// keepRestartOnly returns new with the restart-only sections of old: the
// config the daemon runs after a reload.
func keepRestartOnly(old, new *config.Config) *config.Config {
	c := *new
	c.Admin, c.Console, c.Log, c.Journal, c.Fluid = old.Admin, old.Console, old.Log, old.Journal, old.Fluid
	k := c.Kafka
	k.Embedded = old.Kafka.Embedded
	c.Kafka = k
	return &c
}

// ReloadResult says what a reload did.
type ReloadResult struct {
	At   time.Time `json:"at"`
	File string    `json:"file"`
	// OK is false when the new config was refused: nothing changed, and
	// Error says why (FILE:LINE: ... for each problem).
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// The pipelines by what happened to them.
	Unchanged []string `json:"unchanged"`
	Changed   []string `json:"changed"`
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	// Paused and Resumed are unchanged pipelines whose `paused` the new
	// file flipped.
	Paused  []string `json:"paused,omitempty"`
	Resumed []string `json:"resumed,omitempty"`
	// RestartOnly are changes that need a daemon restart: they were left
	// as they were (sections such as "admin", or "pipeline NAME" for a
	// journal pipeline).
	RestartOnly []string `json:"restart_only,omitempty"`
	// Retried are pipelines that had failed to load and were built and
	// started again (their config unchanged).
	Retried []string `json:"retried,omitempty"`
	// Warnings are problems that did not stop the reload (a Wasm plugin
	// file of an unchanged pipeline that no longer loads: the running
	// version stays; a pipeline that failed to load and still does).
	Warnings []string `json:"warnings,omitempty"`
	// Took is how long the reload took, draining included.
	Took string `json:"took"`
}

// reloadMetrics count reloads.
type reloadMetrics struct {
	total     *prometheus.CounterVec
	ok        prometheus.Gauge
	okAt      prometheus.Gauge
	durations prometheus.Histogram
}

func newReloadMetrics(reg prometheus.Registerer) *reloadMetrics {
	m := &reloadMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamd_config_reloads_total",
			Help: "Config reloads, by result: ok, or error (the new config was refused and nothing changed)."}, []string{"result"}),
		ok: prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamd_config_last_reload_successful",
			Help: "1 if the last config reload was applied (or none was tried), 0 if it was refused."}),
		okAt: prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamd_config_last_reload_success_timestamp_seconds",
			Help: "When the running config was last loaded successfully (start or reload), Unix seconds."}),
		durations: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "streamd_config_reload_duration_seconds",
			Help: "How long applied reloads took, draining the changed pipelines included.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
	}
	m.ok.Set(1)
	m.okAt.SetToCurrentTime()
	reg.MustRegister(m.total, m.ok, m.okAt, m.durations)
	return m
}

// Reload reads the config file again and applies it as a diff. The new
// file is validated first as `streamd lint` does (parsed, checked, host
// directories checked, and every pipeline that will start built with its
// plugins loaded): if anything is wrong, nothing changes and the error is
// returned, logged, kept for Status and counted. Otherwise pipelines whose
// effective config is the same are left alone (no reconnect, no
// rebalance, no pause); changed ones are drained as on SIGTERM and started
// with the new config; new ones start; removed ones are drained and
// stopped; one that had failed to load is built again. Changes to
// restart-only settings are reported and left. Reloads and restarts run
// one at a time, in line (lifecycle.go): ctx bounds the wait for those
// before it (ErrBusy); reloads asked for while one waits are served by it.
func (a *App) Reload(ctx context.Context) (ReloadResult, error) {
	o, err := a.submit(opReload, "", nil)
	if err == nil {
		err = a.await(ctx, o)
	}
	if err != nil {
		return ReloadResult{At: time.Now(), File: a.config().File, Error: err.Error()}, err
	}
	return o.res, o.err
}

// reload is the reload operation.
func (a *App) reload(ctx context.Context) (ReloadResult, error) {
	start := time.Now()
	if a.reloadStart != nil {
		a.reloadStart()
	}
	var result error
	defer func() {
		if a.reloadEnd != nil {
			a.reloadEnd(result)
		}
	}()
	old := a.config()
	res := ReloadResult{At: start, File: old.File}
	fail := func(err error) (ReloadResult, error) {
		res.OK, res.Error, res.Took = false, err.Error(), time.Since(start).Round(time.Millisecond).String()
		res.Unchanged, res.Changed, res.Added, res.Removed, res.Retried = nil, nil, nil, nil, nil
		a.reloads.total.WithLabelValues("error").Inc()
		a.reloads.ok.Set(0)
		a.log.Error("config reload refused; the running config stays", "file", old.File, "err", err)
		a.setLastReload(res)
		result = err
		return res, err
	}
	cfg, err := config.Load(old.File)
	if err != nil {
		return fail(err)
	}
	if err := cfg.CheckHostDirs(); err != nil {
		return fail(err)
	}
	res.RestartOnly = restartOnly(old, cfg)
	eff := keepRestartOnly(old, cfg)

	// Plan: which units stay, which are replaced, which go, which come,
	// and which had failed to load and are built again.
	a.mu.Lock()
	current := slices.Clone(a.units)
	failedLoad := map[*unit]bool{}
	for _, u := range current {
		failedLoad[u] = !u.built && u.state == unitEnded && u.err != nil
	}
	cache := a.cl
	a.mu.Unlock()
	byName := map[string]*unit{}
	for _, u := range current {
		byName[u.name] = u
	}
	type planned struct {
		i     int   // index in eff.Pipelines
		old   *unit // nil: added
		keep  bool
		retry bool // old failed to load: built again, a warning if it fails again
	}
	var plan []planned
	seen := map[string]bool{}
	for i := range eff.Pipelines {
		pc := &eff.Pipelines[i]
		seen[pc.Name] = true
		u := byName[pc.Name]
		pl := planned{i: i, old: u}
		switch {
		case u != nil && u.eff.equal(effectiveOf(eff, i)):
			pl.keep = !failedLoad[u]
			pl.retry = failedLoad[u]
		case u != nil && (u.pc.Sink.Type == "journal" || pc.Sink.Type == "journal"):
			pl.keep = true
			res.RestartOnly = append(res.RestartOnly, "pipeline "+pc.Name+" (journal pipelines change only with a restart)")
		case u == nil && pc.Sink.Type == "journal":
			res.RestartOnly = append(res.RestartOnly, "pipeline "+pc.Name+" (journal pipelines are added only with a restart)")
			continue
		}
		plan = append(plan, pl)
	}
	var removed []*unit
	for _, u := range current {
		if seen[u.name] {
			continue
		}
		if u.pc.Sink.Type == "journal" {
			res.RestartOnly = append(res.RestartOnly, "pipeline "+u.name+" (journal pipelines are removed only with a restart)")
			continue
		}
		removed = append(removed, u)
	}

	// Build every new unit (all at once) before touching anything.
	freshRegistries, freshClusters := !reflect.DeepEqual(old.SchemaRegistry, eff.SchemaRegistry), !reflect.DeepEqual(old.Kafka, eff.Kafka)
	if freshRegistries || freshClusters {
		cache = cache.renew(freshRegistries, freshClusters)
	}
	var (
		building []*unit
		which    []int // index in plan
	)
	for k, pl := range plan {
		if !pl.keep {
			building = append(building, newUnit(eff, pl.i))
			which = append(which, k)
		}
	}
	built := map[int]*unit{} // by index in eff.Pipelines
	var errs []error
	for j, err := range a.buildAll(ctx, building, cache) {
		pl := plan[which[j]]
		switch {
		case err == nil:
			built[pl.i] = building[j]
		case pl.retry:
			a.log.Error("pipeline still fails to load", "pipeline", pl.old.name, "err", err)
			res.Warnings = append(res.Warnings, fmt.Sprintf("pipeline %s still fails to load: %v", pl.old.name, err))
			a.mu.Lock()
			pl.old.err = err
			a.mu.Unlock()
		default:
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, u := range built {
			a.stop(u)
		}
		return fail(err)
	}

	// Apply: drain what goes or is replaced (at once, each within its
	// shutdown timeout), then swap the table and start what comes.
	var leaving []*unit
	for _, pl := range plan {
		if built[pl.i] != nil && pl.old != nil {
			leaving = append(leaving, pl.old)
		}
	}
	leaving = append(leaving, removed...)
	var wg sync.WaitGroup
	for _, u := range leaving {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.stop(u)
		}()
	}
	wg.Wait()
	var flips []*unit // kept units whose `paused` the file flipped
	a.pauseMu.Lock()
	a.mu.Lock()
	next := make([]*unit, 0, len(plan))
	for _, pl := range plan {
		pc := eff.Pipelines[pl.i]
		u := built[pl.i]
		if u == nil { // kept, or a retry that failed again
			u = pl.old
			if pc.Paused != u.pc.Paused {
				u.paused = pc.Paused
				flips = append(flips, u)
			}
			if u.eff.equal(effectiveOf(eff, pl.i)) {
				u.pc = pc
			}
			res.Unchanged = append(res.Unchanged, u.name)
			next = append(next, u)
			continue
		}
		switch {
		case pl.old == nil:
			res.Added = append(res.Added, u.name)
		case pl.retry:
			carry(pl.old, u)
			res.Retried = append(res.Retried, u.name)
		default:
			carry(pl.old, u)
			if pc.Paused != pl.old.pc.Paused {
				u.paused = pc.Paused
			}
			res.Changed = append(res.Changed, u.name)
		}
		next = append(next, u)
	}
	for _, u := range removed {
		res.Removed = append(res.Removed, u.name)
	}
	// Units kept because they cannot change (journal) stay in the list.
	for _, u := range current {
		if !seen[u.name] && !slices.Contains(removed, u) {
			next = append(next, u)
		}
	}
	a.units = next
	a.cfg = eff
	a.cl = cache
	var unchangedPlugins []plugins.Plugin
	for _, u := range next {
		if slices.Contains(res.Unchanged, u.name) && u.built {
			unchangedPlugins = append(unchangedPlugins, u.loaded...)
		}
	}
	a.mu.Unlock()
	for _, u := range flips {
		a.mu.Lock()
		p := u.p
		if u.state != unitRunning {
			p = nil
		}
		a.mu.Unlock()
		if u.paused {
			res.Paused = append(res.Paused, u.name)
			if p != nil {
				p.Pause()
			}
		} else {
			res.Resumed = append(res.Resumed, u.name)
			if p != nil {
				p.Resume()
			}
		}
	}
	a.pauseMu.Unlock()
	for _, pl := range plan {
		if u := built[pl.i]; u != nil {
			a.start(u)
		}
	}
	// The Wasm files of the pipelines left alone are loaded again if they
	// changed (as SIGHUP always did): swapped in between batches.
	res.Warnings = append(res.Warnings, reloadPlugins(ctx, a.log, unchangedPlugins)...)
	res.Warnings = append(res.Warnings, reloadPlugins(ctx, a.log, a.loaded)...)
	res.OK = true
	took := time.Since(start)
	res.Took = took.Round(time.Millisecond).String()
	a.reloads.total.WithLabelValues("ok").Inc()
	a.reloads.ok.Set(1)
	a.reloads.okAt.SetToCurrentTime()
	a.reloads.durations.Observe(took.Seconds())
	a.log.Info("config reloaded", "file", old.File, "unchanged", res.Unchanged, "changed", res.Changed, "added", res.Added,
		"removed", res.Removed, "retried", res.Retried, "took", took.Round(time.Millisecond))
	if len(res.RestartOnly) > 0 {
		a.log.Warn("config reload: these changes need a restart and were not applied", "restart_only", res.RestartOnly)
	}
	a.setLastReload(res)
	return res, nil
}

// ReloadOn reloads the config (Reload) for every signal that comes on
// hup, until ctx is done: SIGHUP, as `streamd run` relays it. Signals sent
// while a reload runs are not lost: with signal.Notify's buffered channel,
// they make one more reload after it. Each result is logged (and kept for
// Status).
func (a *App) ReloadOn(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-hup:
			a.log.Info("reloading the config", "signal", sig)
			_, _ = a.Reload(ctx) // logs its result
		}
	}
}

// SetReloadHooks sets functions called when a reload starts and when it
// ended (with its error, nil when applied), whatever asked for it: SIGHUP,
// POST /v1/reload or streamd ctl reload. Set them before Run.
func (a *App) SetReloadHooks(start func(), end func(error)) {
	a.reloadStart, a.reloadEnd = start, end
}

// reloader is implemented by plugins that can swap in a new build of their
// module between batches (plugins/wasm).
type reloader interface {
	Reload(ctx context.Context) error
}

// reloadPlugins loads the files of ps again where they changed; it
// returns a warning per plugin whose new file does not load (its running
// version stays).
func reloadPlugins(ctx context.Context, log *slog.Logger, ps []plugins.Plugin) []string {
	var warns []string
	for _, p := range ps {
		r, ok := p.(reloader)
		if !ok {
			continue
		}
		if err := r.Reload(ctx); err != nil {
			log.Error("plugin reload failed; the running version stays", "plugin", p.Manifest().Name, "err", err)
			warns = append(warns, fmt.Sprintf("plugin %s: %v (the running version stays)", p.Manifest().Name, err))
		}
	}
	return warns
}

// derive returns an App that builds units from cfg with a's shared parts:
// its logger, loader, metrics, admin server, console, journal and fluid
// bridge, and the Kafka clusters and schema registry clients of cl. Each
// unit is built by a derive of its own (App.cur is the unit being built),
// so that units build at once.
func (a *App) derive(cfg *config.Config, cl *clientCache) *App {
	a.mu.Lock()
	defer a.mu.Unlock()
	return &App{cfg: cfg, log: a.log, open: a.open, stdout: a.stdout, reg: a.reg, metrics: a.metrics, reloads: a.reloads,
		journal: a.journal, Admin: a.Admin, AdminAddr: a.AdminAddr, console: a.console, adm: a.adm, bridge: a.bridge,
		cl: cl, root: a.top(), loadTimeout: loadTimeout(cfg)}
}

// loadTimeout is cfg's [plugins] load_timeout.
func loadTimeout(cfg *config.Config) time.Duration {
	if d := cfg.Plugins.LoadTimeout.Duration; d > 0 {
		return d
	}
	return config.DefaultLoadTimeout
}

// top is the daemon's App: a itself, or the one a was derived from.
func (a *App) top() *App {
	if a.root != nil {
		return a.root
	}
	return a
}

// clientCache holds the Kafka clusters and schema registry clients made
// for a config, shared by the units built from it (security.go,
// schema.go).
type clientCache struct {
	mu         sync.Mutex
	clusters   map[string]*kafka.Cluster
	registries map[string]*sr.Client
}

func newClientCache() *clientCache {
	return &clientCache{clusters: map[string]*kafka.Cluster{}, registries: map[string]*sr.Client{}}
}

// renew returns a cache for a config whose [schema_registry] sections
// (registries) or [kafka] sections (clusters) changed: those are made
// afresh, the others shared.
func (c *clientCache) renew(registries, clusters bool) *clientCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := newClientCache()
	if !registries {
		maps.Copy(n.registries, c.registries)
	}
	if !clusters {
		maps.Copy(n.clusters, c.clusters)
	}
	return n
}

// config returns the running config.
func (a *App) config() *config.Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

func (a *App) setLastReload(r ReloadResult) {
	a.mu.Lock()
	a.lastReload = &r
	a.mu.Unlock()
}

// LastReload returns the result of the last reload, nil if none was tried.
func (a *App) LastReload() *ReloadResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lastReload == nil {
		return nil
	}
	r := *a.lastReload
	return &r
}
