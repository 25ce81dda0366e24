package pipeline

import (
	"log/slog"
	"time"

	"github.com/streamd/streamd/plugins"
)

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
	observers       []Observer
	txnRecords      int
	txnInterval     time.Duration
	paused          bool
}

// WithStages sets the transform stages, run in order.
func WithStages(stages ...Stage) Option { return func(o *options) { o.stages = stages } }

// WithBatch sets the batching policy: a batch is written when it holds
// maxRecords records or maxBytes bytes, or linger after its first record,
// or at once when a BoundedSource answers with fewer records than it was
// asked for (it has no more at hand, so none is coming for the linger).
// 0 means the default of each (DefaultMaxRecords, DefaultMaxBytes,
// DefaultLinger); a negative maxRecords or maxBytes is 1, and a negative
// linger writes a batch as soon as a fetch is in, without waiting.
func WithBatch(maxRecords, maxBytes int, linger time.Duration) Option {
	return func(o *options) { o.maxRecords, o.maxBytes, o.linger = maxRecords, maxBytes, linger }
}

// WithWorkers sets how many batches are processed at once. Records of one
// partition always go to the same worker. 0 means DefaultWorkers; a
// negative n is 1.
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithMaxInFlight bounds records fetched but not yet acknowledged; fetching
// pauses above it. 0 means DefaultMaxInFlight; a negative n is 1.
func WithMaxInFlight(n int) Option { return func(o *options) { o.maxInFlight = n } }

// WithErrorPolicy sets the error policy; dlq is the dead-letter sink for PolicyDLQ.
func WithErrorPolicy(p Policy, dlq plugins.Sink) Option {
	return func(o *options) { o.policy, o.dlq = p, dlq }
}

// WithRetry sets the capped exponential backoff of transient sink and stage
// errors: the first retry waits initial, each next one twice as long, at
// most maxBackoff; attempts 0 (or negative) retries until shutdown. 0 means
// DefaultRetryInitial and DefaultRetryMax; a negative initial is 1 ms, and
// a maxBackoff below initial is initial.
func WithRetry(initial, maxBackoff time.Duration, attempts int) Option {
	return func(o *options) { o.retryInitial, o.retryMax, o.retryAttempts = initial, maxBackoff, attempts }
}

// WithShutdownTimeout bounds the whole shutdown after Run's context is done
// (or the pipeline failed): one deadline, d later, for draining in-flight
// work, the final commit and closing the source (a Kafka source leaves its
// group; streamd closes the sinks by [Pipeline.ShutdownDeadline] too).
// Draining gets d less a close reserve (a fifth of d, 500 ms to 2 s); what
// is still in flight then is abandoned, not acknowledged, and the rest is
// for the commit and the close. 0 means DefaultShutdownTimeout; a negative
// d abandons in-flight work at once and leaves the commit and the close
// 500 ms.
func WithShutdownTimeout(d time.Duration) Option { return func(o *options) { o.shutdownTimeout = d } }

// WithCommitInterval sets how often acknowledged positions are committed.
// 0 means DefaultCommitInterval; a negative d commits after every
// acknowledged batch.
func WithCommitInterval(d time.Duration) Option { return func(o *options) { o.commitInterval = d } }

// WithStallTimeout sets how long a pipeline with work pending (records in
// flight, or a partition whose lag cannot be measured) may go without
// acknowledging a batch before Status reports it stalled and Ready is
// false. 0 means DefaultStallTimeout; a negative d never reports a stall.
func WithStallTimeout(d time.Duration) Option { return func(o *options) { o.stallTimeout = d } }

// WithTransactions sizes the transactions of a pipeline whose source runs
// in them (Transactor): one ends when it holds maxRecords fetched records
// or interval after its first record, once everything fetched in it is
// written; its output is visible to read_committed readers only then. 0
// means DefaultTxnRecords and DefaultTxnInterval; a negative maxRecords is
// 1 and a negative interval ends one after every fetch.
func WithTransactions(maxRecords int, interval time.Duration) Option {
	return func(o *options) { o.txnRecords, o.txnInterval = maxRecords, interval }
}

// resolve replaces zero values by the defaults and clamps negative ones,
// whatever the order the options came in. Afterwards a zero linger,
// shutdown timeout, commit interval or stall timeout means none.
func (o *options) resolve() {
	// Counts: a negative one is 1.
	orDefault(&o.maxRecords, DefaultMaxRecords, 1)
	orDefault(&o.maxBytes, DefaultMaxBytes, 1)
	orDefault(&o.workers, DefaultWorkers, 1)
	orDefault(&o.maxInFlight, DefaultMaxInFlight, 1)
	orDefault(&o.txnRecords, DefaultTxnRecords, 1)
	// Durations: a negative one is none.
	orDefault(&o.linger, DefaultLinger, 0)
	orDefault(&o.shutdownTimeout, DefaultShutdownTimeout, 0)
	orDefault(&o.commitInterval, DefaultCommitInterval, 0)
	orDefault(&o.stallTimeout, DefaultStallTimeout, 0)
	orDefault(&o.txnInterval, DefaultTxnInterval, 0)
	// Retry backoffs: never none.
	orDefault(&o.retryInitial, DefaultRetryInitial, minRetryBackoff)
	orDefault(&o.retryMax, DefaultRetryMax, DefaultRetryMax)
	o.retryMax = max(o.retryMax, o.retryInitial)
	o.retryAttempts = max(o.retryAttempts, 0)
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
}

// orDefault sets *v to def when it is zero and to low when it is negative.
func orDefault[T int | time.Duration](v *T, def, low T) {
	switch {
	case *v == 0:
		*v = def
	case *v < 0:
		*v = low
	}
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithObserver adds observers (see Observer); it may be given more than
// once. A nil observer is ignored.
func WithObserver(obs ...Observer) Option {
	return func(o *options) { o.observers = append(o.observers, obs...) }
}

// minRetryBackoff is the shortest retry backoff: a negative one is clamped
// to it.
const minRetryBackoff = time.Millisecond
