// Package opscli is the operator's commands of streamd: `streamd dlq
// ls|show|replay` (dead letters, read from Kafka or replayed through the
// running daemon's admin API), `streamd tap` (a sample of the records
// into and out of a stage of the running daemon) and `streamd ctl` (the
// running daemon's status, pause, resume, restart and reload).
package opscli
