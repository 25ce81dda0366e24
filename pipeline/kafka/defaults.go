package kafka

import "time"

// Defaults of the Kafka source and sink settings that streamd's config
// fills in for the keys a file leaves out.
const (
	// DefaultPartitions is the partition count of topics created on demand
	// (SourceConfig.Partitions, SinkConfig.Partitions, EnsureTopics).
	DefaultPartitions = 4
	// DefaultSessionTimeout is the group session timeout when
	// SourceConfig.SessionTimeout is 0: franz-go's default, stated here so
	// the config and the docs can name it.
	DefaultSessionTimeout = 45 * time.Second
	// DefaultLagInterval is how often a Source queries the end offsets of
	// its partitions for the lag (SourceConfig.LagInterval).
	DefaultLagInterval = 5 * time.Second
)

// Defaults of the source's fetch settings and group protocol
// (SourceConfig's fields; streamd's config fills them in for the keys a
// file leaves out).
const (
	// DefaultFetchMaxBytes bounds one fetch response: 8 MiB, where
	// franz-go's and Kafka's fetch.max.bytes is 50 MiB. The source reads
	// one response ahead of the pipeline while the client fetches the
	// next, so two responses are in memory, decompressed. On 1,000
	// partitions with a backlog, 50 MiB held 432 MiB and waited 1.6 s for
	// the first record (a whole response decoded first), 8 MiB 280 MiB and
	// 0.43 s; but 8 MiB is ~8 KiB a partition a fetch there, and the
	// steady records/s was 0.54 of a franz-go loop's (1.02 at 50 MiB):
	// with many partitions and a backlog, raise it (docs/benchmarks.md,
	// "streamd as a user runs it").
	DefaultFetchMaxBytes = 8 << 20
	// DefaultFetchMaxPartitionBytes bounds a partition's share of a fetch:
	// 512 KiB, where Kafka's max.partition.fetch.bytes is 1 MiB, for the
	// same reason: with 4 partitions of 200-byte records, 50 MiB and 1 MiB
	// made the passthrough's peak resident set 318 MiB, 8 MiB and 512 KiB
	// 211 MiB (a franz-go loop's 244 MiB), at the same records/s within
	// the noise. A larger batch still comes whole.
	DefaultFetchMaxPartitionBytes = 512 << 10
	// DefaultFetchMinBytes is how much a fetch waits for: 1 byte.
	DefaultFetchMinBytes = 1
	// DefaultFetchMaxWait is how long a fetch waits for FetchMinBytes:
	// 100 ms, for low latency when topics are quiet (Kafka's is 500 ms).
	DefaultFetchMaxWait = 100 * time.Millisecond
	// DefaultGroupProtocol is the consumer group protocol: "classic" with
	// the cooperative-sticky balancer. "consumer" (KIP-848, where the
	// broker has it, else classic) is the other choice; it is not the
	// default because a static member (streamd's instance_id "auto")
	// restarted after a crash waits out the session timeout for its
	// partitions under KIP-848 (Kafka 4.1 answers UNRELEASED_INSTANCE_ID
	// until the old member expires: 48 s instead of seconds in
	// internal/tests/e2e TestRestartTakesPartitionsBack), and franz-go advises
	// KIP-848 only from Kafka 4.3 (STALE_MEMBER_EPOCH on commits before).
	DefaultGroupProtocol = "classic"
)
