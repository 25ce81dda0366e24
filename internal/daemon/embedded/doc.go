// Package embedded starts the in-process Kafka broker of streamd's
// [kafka.embedded] config section and of `streamd broker`: franz-go's kfake,
// persisting to a data directory.
//
// It is one node with no replicas, for development, demos and CI, and for a
// small deployment or long-running demo on one machine that is left running
// for weeks: its disk, memory and open files follow what it retains, not
// what it was ever given. For that the broker applies retention to every
// topic on a short ticker (kfake by itself applies it only to topics that
// set a retention of their own, and hourly), within a disk budget for its
// whole data directory, and reports what it deleted that a consumer group
// had not read. Durability beyond one disk, several machines, and volume
// belong on a Kafka cluster.
//
// Start returns a Broker; its Stats and Collector give its figures (disk,
// budget, an estimate of its index in memory, each partition's retained
// range, what retention deleted).
package embedded
