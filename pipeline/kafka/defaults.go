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
