// Package brokercli is `streamd broker`: the embedded Kafka broker of
// internal/daemon/embedded run alone, with its retention, disk budget and
// metrics.
package brokercli
