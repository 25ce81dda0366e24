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
// Stages and sinks are plugins.Transformer and plugins.Sink values: the
// pipeline knows nothing of Wasm or plugin processes. Sources and sinks for
// Kafka live in pipeline/kafka.
package pipeline
