package pipeline

import (
	"context"

	"github.com/streamd/streamd/record"
)

// Msg is one record read by a Source, with an opaque token the Source uses
// to recognise it on Ack (a Kafka source stores the partition's assignment
// epoch there, so acks that arrive after a revoke are ignored).
type Msg struct {
	Record record.Record
	Token  uint64
}

// Source is where a pipeline reads. Fetch and Ack are called from different
// goroutines; Ack calls for one partition come in offset order.
type Source interface {
	// Fetch blocks until records are available. It returns io.EOF when a
	// finite source has no more records, and ctx.Err() when ctx is done.
	Fetch(ctx context.Context) ([]Msg, error)
	// Ack says that every output of msgs is durably written or handled by
	// the error policy.
	Ack(msgs []Msg)
	// Commit makes acknowledged positions durable (a Kafka group commit).
	// It is called periodically and once at shutdown.
	Commit(ctx context.Context) error
	// Close releases the source; ctx bounds how long it may take (Run
	// closes the source with what is left of the shutdown's deadline, so a
	// Kafka source's group leave ends with it).
	Close(ctx context.Context) error
}

// BoundedSource is implemented by sources that can return at most n
// records from one fetch. The pipeline then asks only for what fits under
// max_in_flight, so in-flight records never exceed it; from other sources
// one fetch may overshoot the bound.
type BoundedSource interface {
	FetchUpTo(ctx context.Context, n int) ([]Msg, error)
}

// Liveness is implemented by sources whose records can become stale: a
// Kafka partition revoked from this member. The pipeline drops stale
// records instead of writing them, and never acknowledges them.
type Liveness interface {
	Live(m *Msg) bool
}

// BatchLiveness is Liveness for a whole batch at once (one lock per batch,
// not per record); the pipeline prefers it. FilterLive returns the live
// records in order; it must not modify msgs, and returns msgs itself when
// all are live.
type BatchLiveness interface {
	FilterLive(msgs []Msg) []Msg
}

// Readier is implemented by sources and sinks that can check their
// connection; a pipeline is ready once every part's Ready returns nil.
type Readier interface {
	Ready(ctx context.Context) error
}

// Describer is implemented by sources and sinks that can say what they
// are connected to, for /pipelines (a Kafka source: its cluster, group and
// group protocol).
type Describer interface {
	Describe() map[string]string
}

// Skipper is implemented by sources that can lose records before reading
// them: a Kafka partition whose next records the broker deleted
// (retention: OFFSET_OUT_OF_RANGE) resumes at the log start. The source
// logs each skip with its range; Skipped returns how many records it
// skipped so far, per "topic/partition" (for /pipelines and the
// streamd_source_records_skipped_total metric).
type Skipper interface {
	Skipped() map[string]int64
}

// Lagger is implemented by sources that know how far behind they are.
type Lagger interface {
	// Lag returns records not yet consumed, per "topic/partition" of the
	// partitions the source is assigned (or lost and not assigned
	// again), LagUnknown where it cannot be measured now.
	Lag() LagMap
}

// AsyncSink is implemented by sinks that can take the next batch before the
// previous one is durable, such as a Kafka producer. WriteAsync must begin
// writing batches in call order (so a partition's order is kept) and call
// done exactly once, from any goroutine, with the same meaning as
// plugins.Sink.Write's results. The pipeline keeps a few batches in flight
// per worker and acknowledges them in order.
type AsyncSink interface {
	WriteAsync(ctx context.Context, batch []record.Record, done func(errs []error, err error))
}

// MsgSink is implemented by AsyncSinks that can also write a batch's
// records where the source put them, in its Msgs: a pipeline with no
// stage hands a batch to WriteMsgsAsync as it was fetched, instead of
// copying each record into a []record.Record for WriteAsync first.
// WriteMsgsAsync writes msgs[i].Record for every i, with WriteAsync's
// contract (errs[i] answers for msgs[i]); it must not modify msgs.
type MsgSink interface {
	AsyncSink
	WriteMsgsAsync(ctx context.Context, msgs []Msg, done func(errs []error, err error))
}
