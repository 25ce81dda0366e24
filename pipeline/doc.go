// Package pipeline runs consume -> transform -> produce pipelines with
// at-least-once delivery.
//
// A Pipeline reads Msgs from a Source, groups them into batches (max
// records, max bytes, linger), passes each batch through its transform
// stages in order, writes the result to a Sink, and acknowledges the input
// to the Source only when every output of it has been written (or sent to
// the error policy). Records of one partition always go to the same worker,
// so their order is kept end to end and their acknowledgements arrive in
// offset order: a Source can commit "last acknowledged offset + 1".
//
// There is one write path: every sink is written as an AsyncSink (a plain
// plugins.Sink is wrapped as one that writes a batch at a time). A record
// the sink fails transiently is written again, followed again by every
// record of its source partition written after it, so a partition's
// records end in the sink in order (at worst replayed, never reordered).
// A pipeline with no stage hands a MsgSink the fetched Msgs themselves,
// without copying their records.
//
// Stages and sinks are plugins.Transformer and plugins.Sink values: the
// pipeline knows nothing of Wasm or plugin processes. Sources and sinks for
// Kafka live in pipeline/kafka, the Prometheus exporter in pipeline/metrics
// (an Observer: the pipeline imports no metrics library), a memory source
// and sink for tests in pipeline/pipelinetest.
//
// The code, by concept: state.go (Pipeline, State, Status, Counts),
// run.go (Run: readiness, fetching, commits, shutdown), dispatch.go
// (records to workers by partition), worker.go (batching), stages.go
// (transform stages, poison isolation, stage retries), write.go (the
// write path and its ordered retry), policy.go (error policies, dead
// letters), stall.go (lag, stalls, readiness reasons), observe.go
// (observers), options.go and defaults.go.
package pipeline
