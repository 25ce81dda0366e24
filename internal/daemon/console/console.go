package console

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamd/streamd/internal/daemon/admin"
	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

//go:embed static
var static embed.FS

// Pipeline is what the console is told about one pipeline.
type Pipeline struct {
	Name string
	P    *pipeline.Pipeline
	// Loading is the status of a pipeline that is not built (P is nil):
	// its plugins load, or failed to, with the cause.
	Loading *pipeline.Status
	// Source, Sink and Stages describe the parts, as the config names them.
	Source Source
	Stages []Stage
	Sink   Sink
	// Policy is the error policy: stop, drop or dlq.
	Policy string
	// DLQ reads the dead-letter topic; nil without one.
	DLQ *dlq.Reader
	// ToSource, when set, returns a Target that writes records back to
	// their source topics (or to topic, when not ""), and a func that
	// releases it.
	ToSource func(topic string) (dlq.Target, func(), error)
	// ThroughPipeline, when set, returns a Target that runs records
	// through the pipeline's stages and sink (its error policy applies),
	// and a func that ends it; the Target counts what it rejected.
	ThroughPipeline func(ctx context.Context) (ReplayTarget, error)
	// Owners, when set, returns the member that owns each
	// "topic/partition" of the source's consumer group.
	Owners func(ctx context.Context) (map[string]string, error)
	// Journal is set for a journal replicator pipeline.
	Journal bool
}

// ReplayTarget is a dlq.Target through a pipeline.
type ReplayTarget interface {
	dlq.Target
	// Rejected is how many replayed records the pipeline rejected again
	// (they went to its error policy).
	Rejected() int64
	// Close ends the replay pipeline: it writes what it was given and
	// stops, by ctx.
	Close(ctx context.Context) error
}

// Source describes a pipeline's source.
type Source struct {
	Type   string   `json:"type"`
	Topics []string `json:"topics,omitempty"`
	Group  string   `json:"group,omitempty"`
	// Fluid is the compatible schema version of a fluid consumer, or 0.
	Fluid int `json:"fluid_compatible_version,omitempty"`
}

// Stage describes one transform stage.
type Stage struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Plugin is the plugin's name, when it is one; Part the loaded
	// transformer (for its health, version and reloads).
	Plugin string `json:"plugin,omitempty"`
	Part   any    `json:"-"`
}

// Sink describes a pipeline's sink.
type Sink struct {
	Type  string `json:"type"`
	Topic string `json:"topic,omitempty"`
}

// Journal is what the journal page shows.
type Journal struct {
	// Stats returns each replicator pipeline's counters.
	Stats func() map[string]any
	// Quarantine reads the quarantine topic; nil without one.
	Quarantine *dlq.Reader
}

// Option configures a Console.
type Option func(*options)

type options struct {
	pipelines func() []Pipeline
	journal   *Journal
	fluid     func() any
	broker    func() any // broker.go
	log       *slog.Logger
	interval  time.Duration
	history   time.Duration
	tap       TapLimits
	redact    func(string) string
	replayMax int64
}

// WithPipelines sets where the console learns the pipelines.
func WithPipelines(f func() []Pipeline) Option { return func(o *options) { o.pipelines = f } }

// WithJournal shows the journal page.
func WithJournal(j *Journal) Option { return func(o *options) { o.journal = j } }

// WithFluid shows the fluid page with the bridge's status, as f returns
// it.
func WithFluid(f func() any) Option { return func(o *options) { o.fluid = f } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithReplayMaxRecords bounds the dead letters one replay selects
// (default DefaultReplayMaxRecords); a request may ask for fewer.
func WithReplayMaxRecords(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.replayMax = n
		}
	}
}

// WithRedactor passes the strings of the status the console shows (the
// ticks' pipeline status, the pipeline page) through f: the daemon hides
// there what came into its config from ${ENV} and ${file:}.
func WithRedactor(f func(string) string) Option { return func(o *options) { o.redact = f } }

// WithSampling sets how often pipelines are sampled (default 1s) and how
// long the samples are kept (default 15m).
func WithSampling(interval, history time.Duration) Option {
	return func(o *options) {
		if interval > 0 {
			o.interval = interval
		}
		if history > 0 {
			o.history = history
		}
	}
}

// WithTapLimits bounds the taps; zero fields keep the defaults
// (DefaultTapRate, DefaultTapValueBytes, DefaultTapOpen).
func WithTapLimits(l TapLimits) Option {
	return func(o *options) {
		if l.Rate > 0 {
			o.tap.Rate = l.Rate
		}
		if l.ValueBytes > 0 {
			o.tap.ValueBytes = l.ValueBytes
		}
		if l.Open > 0 {
			o.tap.Open = l.Open
		}
	}
}

// Default sampling.
const (
	DefaultInterval = time.Second
	DefaultHistory  = 15 * time.Minute
)

// Console serves the pages and their API. Start samples; Close stops
// sampling and ends every event stream.
type Console struct {
	o       options
	mux     *http.ServeMux
	routes  []string
	series  *series
	replays *replays

	tick tickCache

	obsMu     sync.Mutex
	observers map[string]*observer
	openTaps  atomic.Int64

	startOnce sync.Once
	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
}

// New returns a console.
func New(opts ...Option) *Console {
	o := options{interval: DefaultInterval, history: DefaultHistory, pipelines: func() []Pipeline { return nil }, replayMax: DefaultReplayMaxRecords,
		tap: TapLimits{Rate: DefaultTapRate, ValueBytes: DefaultTapValueBytes, Open: DefaultTapOpen}}
	for _, f := range opts {
		f(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	c := &Console{o: o, mux: http.NewServeMux(), done: make(chan struct{}), observers: map[string]*observer{}}
	c.series = newSeries(int(o.history / o.interval))
	c.replays = newReplays(o.log, o.replayMax)
	c.handle("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
	c.handle("GET /ui/api/info", c.info)
	c.handle("GET /ui/api/events", c.events)
	c.handle("GET /ui/api/pipelines/{p}", c.pipelineDetail)
	c.handle("GET /ui/api/dlq/{p}", c.dlqList)
	c.handle("GET /ui/api/dlq/{p}/{partition}/{offset}", c.dlqGet)
	c.handle("POST /ui/api/dlq/{p}/replay", c.dlqReplay)
	c.handle("GET /ui/api/replays", c.replayList)
	c.handle("GET /ui/api/replays/{id}", c.replayGet)
	c.handle("GET /ui/api/tap/{p}", c.tapStream)
	c.handle("GET /ui/api/tap/{p}/{stage}", c.tapStream)
	c.handle("GET /ui/api/journal", c.journalInfo)
	c.handle("GET /ui/api/journal/quarantine", c.journalQuarantine)
	c.handle("GET /ui/api/fluid", c.fluidInfo)
	c.handle("GET /ui/api/broker", c.brokerInfo)
	c.handle("/ui/", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/ui/api/"):
			writeErr(w, http.StatusNotFound, "%s %s: no such console API", r.Method, r.URL.Path)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			writeErr(w, http.StatusMethodNotAllowed, "%s %s: the console's files are read with GET", r.Method, r.URL.Path)
		default:
			serveStatic(w, r)
		}
	})
	return c
}

// ServeHTTP serves /ui/ and /ui/api/.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

// handle mounts f on pattern and notes the pattern for Routes.
func (c *Console) handle(pattern string, f http.HandlerFunc) {
	c.mux.HandleFunc(pattern, f)
	c.routes = append(c.routes, pattern)
}

// Routes lists the console's routes as http.ServeMux patterns (the admin
// server's admin.Router).
func (c *Console) Routes() []string { return slices.Clone(c.routes) }

// Start samples the pipelines until Close.
func (c *Console) Start() {
	c.startOnce.Do(func() {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.sample(time.Now())
			t := time.NewTicker(c.o.interval)
			defer t.Stop()
			for {
				select {
				case now := <-t.C:
					c.sample(now)
				case <-c.done:
					return
				}
			}
		}()
	})
}

// Close stops sampling, ends the event streams and cancels running
// replays (what they replayed stays replayed; their progress says where
// they stopped), returning when ctx is done at the latest.
func (c *Console) Close(ctx context.Context) error {
	c.closeOnce.Do(func() { close(c.done) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.replays.close()
		c.wg.Wait()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("console: replays and event streams had not ended by the deadline: %w", ctx.Err())
	}
}

// StageObserver is what the engine tells the console of one pipeline:
// every stage call and every rejected record. It counts per stage
// (records in and out, rejections, call latency) for the pipeline page,
// keeps the last rejections, and feeds the open taps; with no tap open
// a call costs a few atomic adds.
type StageObserver struct{ o *observer }

// Observer returns the StageObserver of pipeline name, whose transform
// stages are stages (in order). It is the same for the same name.
func (c *Console) Observer(name string, stages []string) *StageObserver {
	return &StageObserver{c.observer(name, stages)}
}

// StageCall reports one call of stage's Transformer: its input, its
// results (nil when err failed the whole call) and how long it took. It
// keeps nothing of in and out.
func (s *StageObserver) StageCall(stage string, in []record.Record, out []plugins.Result, err error, took time.Duration) {
	s.o.stageCall(stage, in, out, err, took)
}

// Rejected reports an input record the error policy got: from stage
// (and plugin), because of err.
func (s *StageObserver) Rejected(stage, plugin string, r *record.Record, err error) {
	s.o.rejected(stage, plugin, r, err)
}

// ObserveStage makes s a pipeline observer of stage calls
// (pipeline.WithObserver): each call of a transform stage, batch calls,
// one-record calls and retries alike.
func (s *StageObserver) ObserveStage(c pipeline.StageCall) {
	s.o.stageCall(c.Stage, c.In, c.Out, c.Err, c.Took)
}

// ObserveReject makes s a pipeline observer of rejections: each input
// record the error policy gets, the sink's (stage "sink") included.
func (s *StageObserver) ObserveReject(r pipeline.Rejection) {
	s.o.rejected(r.Stage, r.Plugin, r.Record, r.Err)
}

func (c *Console) pipeline(name string) (Pipeline, bool) {
	for _, p := range c.o.pipelines() {
		if p.Name == name {
			return p, true
		}
	}
	return Pipeline{}, false
}

// serveStatic serves the embedded files: /ui/ is index.html.
func serveStatic(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/ui/")
	if name == "" {
		name = "index.html"
	}
	b, err := fs.ReadFile(static, "static/"+name)
	if err != nil || strings.Contains(name, "..") {
		writeErr(w, http.StatusNotFound, "%s: no such console file", r.URL.Path)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	// The files change with the binary: a browser must not keep an old
	// app.js against a new API.
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(b)
}

// redactJSON is b with the strings the redactor hides hidden.
func (c *Console) redactJSON(b []byte) []byte {
	if c.o.redact == nil {
		return b
	}
	return admin.RedactJSON(b, c.o.redact)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, format string, a ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, a...)})
}
