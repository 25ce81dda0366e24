// Package kgox is what streamd's Kafka code shares on top of franz-go's kgo:
// the one conversion between kgo.Record and record.Record (both ways, with
// the headers of a batch carved from one slab: an allocation per batch, not
// per record); the one way to commit offsets and collect the
// per-partition errors of the commit; and the one way to ask whether a
// topic exists (TopicPartitions: a broker, not the client's metadata cache,
// asked again for a topic created a moment ago). The Kafka source and sink
// (pipeline/kafka), fluid and the journal use it.
package kgox
