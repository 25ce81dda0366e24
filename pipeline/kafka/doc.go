// Package kafka is the pipeline's Kafka source and sink, on franz-go.
//
// The Source is a consumer-group member with auto-commit off. It tags each
// record with its partition's assignment epoch; acknowledgements for a
// partition that has since been revoked (or revoked and assigned again) are
// ignored, so an offset is never committed late. On revoke, what was
// acknowledged is committed before the partition is given up.
//
// The Sink is an idempotent producer (acks=all) that preserves keys,
// headers and timestamps, compresses per sink, and picks partitions by
// Java-compatible murmur2 key hashing, or keeps the source partition number.
// Its writes never time out per record (franz-go would measure such a
// timeout from the record's kept timestamp): a broker outage, a missing
// topic or a moving leader are plugins.Transient and retried by the
// pipeline; only verdicts on the record itself (too large, invalid,
// corrupt, bad timestamp) go to the error policy.
package kafka
