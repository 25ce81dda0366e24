// Package kgox is what streamd's Kafka code shares on top of franz-go's kgo:
// the one conversion between kgo.Record and record.Record (both ways, with
// the headers of a batch carved from one slab: an allocation per batch, not
// per record), and the one way to commit offsets and collect the
// per-partition errors of the commit. The Kafka source and sink
// (pipeline/kafka), fluid and the journal use it.
package kgox
