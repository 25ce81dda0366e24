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
//
// A Cluster says how to reach a cluster (TLS, SASL with franz-go's
// pkg/sasl mechanisms, rack, the settings of topics created there); both
// take one (SourceConfig.Cluster, SinkConfig.Cluster), and every client of
// the cluster can start from its Options. Their Ready checks and errors
// go through Cluster.Explain: one line (an *Error) naming the cluster, the
// broker and what was refused, with what to check (a wrong password, a
// mechanism the listener lacks, an untrusted or expired certificate, a
// host name not in it, an ACL denial on a topic or group).
package kafka
