// Package embedded starts the in-process Kafka broker of streamd's
// [kafka.embedded] config section and of `streamd broker`: franz-go's kfake,
// persisting to a data directory.
package embedded
