// Package schema is streamd's built-in Schema Registry stage: it turns
// records in the Confluent wire format (a zero byte, a 4-byte schema id,
// for Protobuf the message indexes, then Avro, Protobuf or JSON Schema
// data) into JSON for the stages after it, and JSON back into that format
// against a subject.
//
// Schemas come from a Confluent-compatible registry (the Registry
// interface; franz-go's *sr.Client is one) and are cached by id. A record
// that does not decode, or does not fit the schema on encode, gets a
// per-record error naming the schema id, the subject and why; a registry
// that cannot be reached fails the whole batch with a plugins.Transient
// error, which the pipeline retries: an outage is never a verdict on a
// record. The JSON mapping of each format (Avro unions, logical types,
// bytes; Protobuf's protojson; JSON Schema as is) is in
// docs/schema-registry.md.
//
// The stage knows nothing about Kafka clients: a record's topic is only a
// name for the topic-name subject strategies.
package schema
