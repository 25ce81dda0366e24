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
package kafka
