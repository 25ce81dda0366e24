package pipeline

import "time"

// The defaults of a Pipeline's options: the values it uses when an option is
// not given. streamd's config uses them for the keys a file leaves out, so
// the library, the daemon and the README say the same.
const (
	// DefaultMaxRecords is the most records in one batch ([WithBatch]).
	DefaultMaxRecords = 1024
	// DefaultMaxBytes is the most key+value bytes in one batch ([WithBatch]).
	DefaultMaxBytes = 1 << 20
	// DefaultLinger is how long a batch waits for more records after its
	// first one, while the source has more at hand ([WithBatch]).
	DefaultLinger = 5 * time.Millisecond
	// DefaultWorkers is how many batches are processed at once ([WithWorkers]).
	DefaultWorkers = 2
	// DefaultMaxInFlight bounds records fetched but not yet acknowledged
	// ([WithMaxInFlight]).
	DefaultMaxInFlight = 50000
	// DefaultRetryInitial is the first backoff of a transient sink error
	// ([WithRetry]).
	DefaultRetryInitial = 100 * time.Millisecond
	// DefaultRetryMax caps the doubling backoff ([WithRetry]).
	DefaultRetryMax = 10 * time.Second
	// DefaultShutdownTimeout bounds draining after Run's context is done
	// ([WithShutdownTimeout]).
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultCommitInterval is how often acknowledged positions are
	// committed ([WithCommitInterval]).
	DefaultCommitInterval = time.Second
	// DefaultStallTimeout is how long a pipeline with work pending may make
	// no progress before it is reported stalled ([WithStallTimeout]).
	DefaultStallTimeout = 30 * time.Second
	// DefaultTxnRecords is the most fetched records in one transaction
	// ([WithTransactions]): DefaultMaxInFlight, so that under load a
	// transaction is as large as the pipeline can hold, and
	// DefaultTxnInterval ends it first at lower rates. Each commit costs a
	// few broker round trips during which the pipeline processes nothing:
	// against its at-least-once records/s in the same run, a passthrough
	// moved 0.15 at 1,000, 0.66 at 10,000 and 0.71 at 50,000
	// (docs/benchmarks.md, "Pipeline vs the bare loop, as a user runs it").
	DefaultTxnRecords = DefaultMaxInFlight
	// DefaultTxnInterval is how long a transaction runs after its first
	// record ([WithTransactions]): the latency exactly-once adds.
	DefaultTxnInterval = 100 * time.Millisecond
)
