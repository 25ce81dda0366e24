package pipeline

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/streamd/streamd/plugins"
)

// Policy says what happens to a record that a stage or the sink rejects.
type Policy int

// The error policies.
const (
	// Stop fails the pipeline; nothing after the bad record is committed.
	Stop Policy = iota
	// Drop logs and counts the record, then acknowledges it.
	Drop
	// DLQ writes the original input record, with error headers, to the
	// dead-letter sink, then acknowledges it.
	DLQ
)

// String returns the policy's config name: stop, drop or dlq.
func (p Policy) String() string {
	switch p {
	case Stop:
		return "stop"
	case Drop:
		return "drop"
	case DLQ:
		return "dlq"
	}
	return "policy(" + strconv.Itoa(int(p)) + ")"
}

// Stage is one transform stage.
type Stage struct {
	// Name identifies the stage in metrics, logs and the streamd-stage header.
	Name string
	// Transformer does the work.
	Transformer plugins.Transformer
	// Plugin is the plugin's name for the streamd-plugin header, if any.
	Plugin string
}

// Option configures a Pipeline.
type Option func(*options)

type options struct {
	stages          []Stage
	maxRecords      int
	maxBytes        int
	linger          time.Duration
	workers         int
	maxInFlight     int
	policy          Policy
	dlq             plugins.Sink
	retryInitial    time.Duration
	retryMax        time.Duration
	retryAttempts   int
	shutdownTimeout time.Duration
	commitInterval  time.Duration
	stallTimeout    time.Duration
	logger          *slog.Logger
	metrics         *Metrics
}

func defaults() options {
	return options{
		maxRecords:      DefaultMaxRecords,
		maxBytes:        DefaultMaxBytes,
		linger:          DefaultLinger,
		workers:         DefaultWorkers,
		maxInFlight:     DefaultMaxInFlight,
		retryInitial:    DefaultRetryInitial,
		retryMax:        DefaultRetryMax,
		shutdownTimeout: DefaultShutdownTimeout,
		commitInterval:  DefaultCommitInterval,
		stallTimeout:    DefaultStallTimeout,
		logger:          slog.New(slog.DiscardHandler),
	}
}

// WithStages sets the transform stages, run in order.
func WithStages(stages ...Stage) Option { return func(o *options) { o.stages = stages } }

// WithBatch sets the batching policy: a batch is written when it holds
// maxRecords records or maxBytes bytes, or linger after its first record.
func WithBatch(maxRecords, maxBytes int, linger time.Duration) Option {
	return func(o *options) { o.maxRecords, o.maxBytes, o.linger = maxRecords, maxBytes, linger }
}

// WithWorkers sets how many batches are processed at once. Records of one
// partition always go to the same worker.
func WithWorkers(n int) Option { return func(o *options) { o.workers = max(1, n) } }

// WithMaxInFlight bounds records fetched but not yet acknowledged; fetching
// pauses above it.
func WithMaxInFlight(n int) Option { return func(o *options) { o.maxInFlight = n } }

// WithErrorPolicy sets the error policy; dlq is the dead-letter sink for DLQ.
func WithErrorPolicy(p Policy, dlq plugins.Sink) Option {
	return func(o *options) { o.policy, o.dlq = p, dlq }
}

// WithRetry sets the capped exponential backoff of transient sink errors;
// attempts 0 retries until shutdown.
func WithRetry(initial, maxBackoff time.Duration, attempts int) Option {
	return func(o *options) { o.retryInitial, o.retryMax, o.retryAttempts = initial, maxBackoff, attempts }
}

// WithShutdownTimeout bounds draining in-flight work after Run's context is
// done.
func WithShutdownTimeout(d time.Duration) Option { return func(o *options) { o.shutdownTimeout = d } }

// WithCommitInterval sets how often acknowledged positions are committed;
// 0 commits after every acknowledged batch.
func WithCommitInterval(d time.Duration) Option { return func(o *options) { o.commitInterval = d } }

// WithStallTimeout sets how long a pipeline with work pending (records in
// flight, or a partition whose lag cannot be measured) may go without
// acknowledging a batch before Status reports it stalled and Ready is
// false; 0 never reports a stall.
func WithStallTimeout(d time.Duration) Option { return func(o *options) { o.stallTimeout = d } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMetrics records the pipeline's metrics in m.
func WithMetrics(m *Metrics) Option { return func(o *options) { o.metrics = m } }
