package config

import (
	"math"
	"time"
)

// The ranges of [kafka.embedded]'s retention keys (defaults:
// defaults.Embedded*).
var (
	rangeRetention      = durRange{lo: time.Second, hi: 10 * 365 * 24 * time.Hour, negative: "keep records forever"}
	rangeRetentionBytes = intRange{lo: 1 << 20, hi: math.MaxInt64, negative: "no bound"}
	rangeSegmentBytes   = intRange{lo: 1 << 20, hi: 1 << 30}
	rangeDiskBudget     = intRange{lo: 64 << 20, hi: math.MaxInt64, negative: "no budget"}
	rangeRetentionCheck = durRange{lo: 100 * time.Millisecond, hi: time.Hour}
)

// embeddedRetention checks the embedded broker's retention keys.
func (k *checker) embeddedRetention(e *Embedded) {
	k.dur("kafka.embedded.retention", e.Retention.Duration, rangeRetention)
	k.int("kafka.embedded.retention_bytes", e.RetentionBytes, rangeRetentionBytes)
	k.int("kafka.embedded.segment_bytes", e.SegmentBytes, rangeSegmentBytes)
	k.int("kafka.embedded.disk_budget_bytes", e.DiskBudgetBytes, rangeDiskBudget)
	k.dur("kafka.embedded.retention_check_interval", e.RetentionCheckInterval.Duration, rangeRetentionCheck)
}
