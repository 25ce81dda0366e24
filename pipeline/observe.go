package pipeline

import (
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// An Observer watches pipelines: metrics exporters, consoles, taps. It is
// any value that implements one or more of NewObserver, StageObserver,
// RejectObserver, BatchObserver and TxnObserver (as franz-go's hooks); New
// finds out which, once. Observers are called from the pipeline's goroutines,
// concurrently; they must return quickly and must neither keep nor change
// the slices and records they are given (copy what is needed). A pipeline
// without an observer of a kind makes no call and takes no time for it.
//
// The pipeline counts its own totals (Status.Counts, Status.Rejected);
// observers are for what a total does not say: each stage call, each
// rejected record, each batch's latency.
type Observer any

// NewObserver is told of every pipeline New makes with it, for observers
// that read Status (a metrics collector).
type NewObserver interface {
	ObserveNew(p *Pipeline)
}

// StageObserver is told of every call of a stage's Transformer: batch
// calls, the one-record calls of isolating a failed batch, and retries.
type StageObserver interface {
	ObserveStage(StageCall)
}

// RejectObserver is told of every input record the error policy gets, once.
type RejectObserver interface {
	ObserveReject(Rejection)
}

// BatchObserver is told of every batch acknowledged to the source.
type BatchObserver interface {
	ObserveBatch(BatchDone)
}

// StageCall is one call of a stage's Transformer.
type StageCall struct {
	Pipeline string
	Stage    string
	// In is the records the stage was given. In and Out are valid only
	// during ObserveStage: the pipeline writes the outputs over In after
	// it (copy what you keep).
	In []record.Record
	// Out is its results, one per record of In; nil when Err failed the
	// call.
	Out []plugins.Result
	// Err failed the whole call (a per-record error is in Out).
	Err  error
	Took time.Duration
}

// Rejection is an input record handed to the error policy.
type Rejection struct {
	Pipeline string
	// Stage is the stage that rejected the record, or SinkStage.
	Stage string
	// Plugin is the stage's plugin name, if any.
	Plugin string
	// Record is the input record, as read from the source.
	Record *record.Record
	Err    error
	// Kind is how it failed: KindRejected, KindTrap, KindTimeout,
	// KindMemory or KindFailed (ErrorKind of Err).
	Kind string
	// Policy is what happens to it.
	Policy Policy
}

// BatchDone is a batch acknowledged to the source.
type BatchDone struct {
	Pipeline string
	// Records is how many input records were acknowledged.
	Records int
	// Written is how many records the sink wrote for them.
	Written int
	// Rejected is how many of the input records the error policy got.
	Rejected int
	// Took is from the start of the batch's stages to its
	// acknowledgement.
	Took time.Duration
}

// observers are a pipeline's observers by kind.
type observers struct {
	news    []NewObserver
	stages  []StageObserver
	rejects []RejectObserver
	batches []BatchObserver
	txns    []TxnObserver
}

func newObservers(all []Observer) observers {
	var o observers
	for _, x := range all {
		if v, ok := x.(NewObserver); ok {
			o.news = append(o.news, v)
		}
		if v, ok := x.(StageObserver); ok {
			o.stages = append(o.stages, v)
		}
		if v, ok := x.(RejectObserver); ok {
			o.rejects = append(o.rejects, v)
		}
		if v, ok := x.(BatchObserver); ok {
			o.batches = append(o.batches, v)
		}
		if v, ok := x.(TxnObserver); ok {
			o.txns = append(o.txns, v)
		}
	}
	return o
}
