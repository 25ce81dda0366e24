package config

import (
	"fmt"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/defaults"
)

// emb is a config with one pipeline and a [kafka.embedded] table holding
// lines.
func emb(lines string) string { return pipe("", "", "", "[kafka.embedded]\n"+lines) }

// TestEmbeddedRetentionDefaults: without keys of its own, the embedded
// broker gets the retention, segment size, disk budget and check interval
// internal/daemon/embedded declares.
func TestEmbeddedRetentionDefaults(t *testing.T) {
	e := mustParse(t, emb("")).Kafka.Embedded
	checks := []struct {
		name      string
		got, want any
	}{
		{"retention", e.Retention.Duration, defaults.EmbeddedRetention},
		{"retention_bytes", e.RetentionBytes, int64(defaults.EmbeddedRetentionBytes)},
		{"segment_bytes", e.SegmentBytes, int64(defaults.EmbeddedSegmentBytes)},
		{"disk_budget_bytes", e.DiskBudgetBytes, int64(defaults.EmbeddedDiskBudget)},
		{"retention_check_interval", e.RetentionCheckInterval.Duration, defaults.EmbeddedRetentionCheck},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

// TestEmbeddedRetentionExplicit: explicit values mean what they say,
// negative ones "no bound".
func TestEmbeddedRetentionExplicit(t *testing.T) {
	e := mustParse(t, emb(`retention = "-1s"
retention_bytes = -1
segment_bytes = 1048576
disk_budget_bytes = -1
retention_check_interval = "100ms"`)).Kafka.Embedded
	if e.Retention.Duration != -time.Second || e.RetentionBytes != -1 || e.SegmentBytes != 1<<20 || e.DiskBudgetBytes != -1 ||
		e.RetentionCheckInterval.Duration != 100*time.Millisecond {
		t.Fatalf("%+v", e)
	}
}

// TestEmbeddedRetentionRefused: each value out of range is an error at
// FILE:LINE naming the key and the allowed values.
func TestEmbeddedRetentionRefused(t *testing.T) {
	for _, tt := range []struct {
		line, want string
	}{
		{`retention = "0s"`, `kafka.embedded.retention: "0s" is out of range (allowed: "1s" to "87600h", or negative for keep records forever)`},
		{`retention = "100000h"`, `kafka.embedded.retention: "100000h" is out of range (allowed: "1s" to "87600h", or negative for keep records forever)`},
		{`retention_bytes = 0`, `kafka.embedded.retention_bytes: 0 is out of range (allowed: 1048576 or more, or negative for no bound)`},
		{`retention_bytes = 1000`, `kafka.embedded.retention_bytes: 1000 is out of range (allowed: 1048576 or more, or negative for no bound)`},
		{`segment_bytes = -1`, `kafka.embedded.segment_bytes: -1 is out of range (allowed: 1048576 to 1073741824)`},
		{`segment_bytes = 2147483648`, `kafka.embedded.segment_bytes: 2147483648 is out of range (allowed: 1048576 to 1073741824)`},
		{`disk_budget_bytes = 0`, `kafka.embedded.disk_budget_bytes: 0 is out of range (allowed: 67108864 or more, or negative for no budget)`},
		{`retention_check_interval = "1ms"`, `kafka.embedded.retention_check_interval: "1ms" is out of range (allowed: "100ms" to "1h")`},
		{`retention_check_interval = "-1s"`, `kafka.embedded.retention_check_interval: "-1s" is out of range (allowed: "100ms" to "1h")`},
	} {
		src := emb(tt.line)
		_, err := Parse("c.toml", []byte(src), env(nil))
		want := fmt.Sprintf("c.toml:%d: %s", lineOf(t, src, tt.line), tt.want)
		if err == nil || colRE.ReplaceAllString(err.Error(), "$1: ") != want {
			t.Errorf("%s:\ngot  %v\nwant %s", tt.line, err, want)
		}
	}
}
