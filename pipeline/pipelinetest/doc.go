// Package pipelinetest has a Source and a Sink held in memory, for tests of
// pipelines and of the stages, sinks and sources they are built from.
//
// A Source serves records of several partitions in chunks, as a Kafka poll
// does, and remembers what was acknowledged and in which order; a Sink keeps
// what it is given and can fail records or whole writes on demand. Both are
// safe for the concurrent use a pipeline makes of them.
package pipelinetest
