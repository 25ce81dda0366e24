package embedded

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns the broker's metrics, as of its last retention check:
// its disk and budget, the estimate of its index's memory, each
// partition's retained range, and what retention deleted (and of that,
// what a consumer group had not read).
func (b *Broker) Collector() prometheus.Collector { return collector{b} }

type collector struct{ b *Broker }

var (
	descDisk       = prometheus.NewDesc("streamd_embedded_disk_bytes", "Bytes of every file under the embedded broker's data directory.", nil, nil)
	descBudget     = prometheus.NewDesc("streamd_embedded_disk_budget_bytes", "The embedded broker's disk budget (absent: none).", nil, nil)
	descBudgetUsed = prometheus.NewDesc("streamd_embedded_disk_budget_used_ratio", "Disk used over the disk budget; past 0.8 the broker warns, past 1 it deletes the oldest records of its largest partitions.", nil, nil)
	descFree       = prometheus.NewDesc("streamd_embedded_filesystem_free_bytes", "Bytes left on the file system of the embedded broker's data directory.", nil, nil)
	descSegments   = prometheus.NewDesc("streamd_embedded_segments", "Segment files of the embedded broker (each one open file while it is active or a fetch has read it).", nil, nil)
	descIndex      = prometheus.NewDesc("streamd_embedded_index_memory_bytes", "Estimated memory of the embedded broker's index of its retained batches (72 bytes a batch).", nil, nil)
	descStart      = prometheus.NewDesc("streamd_embedded_log_start_offset", "First offset the embedded broker retains.", []string{"topic", "partition"}, nil)
	descEnd        = prometheus.NewDesc("streamd_embedded_log_end_offset", "Offset after the last record of the partition (high watermark).", []string{"topic", "partition"}, nil)
	descPartBytes  = prometheus.NewDesc("streamd_embedded_partition_bytes", "Bytes of the record batches the partition retains.", []string{"topic", "partition"}, nil)
	descOldest     = prometheus.NewDesc("streamd_embedded_oldest_record_timestamp_seconds", "Timestamp of the oldest first retained record among the topic's partitions.", []string{"topic"}, nil)
	descDeleted    = prometheus.NewDesc("streamd_embedded_retention_deleted_records_total", "Records retention deleted, by reason: time (retention.ms), size (retention.bytes), disk_budget.", []string{"topic", "reason"}, nil)
	descSkipped    = prometheus.NewDesc("streamd_embedded_retention_skipped_records_total", "Records retention deleted that a consumer group with offsets on them had not read yet.", []string{"topic", "group"}, nil)
	descRuns       = prometheus.NewDesc("streamd_embedded_retention_checks_total", "Retention checks run.", nil, nil)
	descFails      = prometheus.NewDesc("streamd_embedded_retention_check_failures_total", "Retention checks that failed (logged).", nil, nil)
	descLastRun    = prometheus.NewDesc("streamd_embedded_retention_last_check_timestamp_seconds", "When the last retention check took the figures.", nil, nil)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDisk, descBudget, descBudgetUsed, descFree, descSegments, descIndex, descStart, descEnd,
		descPartBytes, descOldest, descDeleted, descSkipped, descRuns, descFails, descLastRun} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	r := c.b.ret
	s := r.snapshot()
	r.mu.Lock()
	runs, fails := r.runs, r.fails
	r.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	counter(descRuns, float64(runs))
	counter(descFails, float64(fails))
	if s.At.IsZero() {
		return // no check yet
	}
	gauge(descLastRun, float64(s.At.UnixMilli())/1e3)
	gauge(descDisk, float64(s.DiskBytes))
	if s.DiskBudget > 0 {
		gauge(descBudget, float64(s.DiskBudget))
		gauge(descBudgetUsed, float64(s.DiskBytes)/float64(s.DiskBudget))
	}
	gauge(descFree, float64(s.FreeBytes))
	gauge(descSegments, float64(s.Segments))
	gauge(descIndex, float64(s.IndexBytes))
	for _, t := range s.Topics {
		for _, p := range t.Partitions {
			ps := strconv.Itoa(int(p.Partition))
			gauge(descStart, float64(p.LogStart), t.Topic, ps)
			gauge(descEnd, float64(p.LogEnd), t.Topic, ps)
			gauge(descPartBytes, float64(p.Bytes), t.Topic, ps)
		}
		if t.OldestMs > 0 {
			gauge(descOldest, float64(t.OldestMs)/1e3, t.Topic)
		}
		for reason, n := range t.Deleted {
			counter(descDeleted, float64(n), t.Topic, reason)
		}
		for group, n := range t.Skipped {
			counter(descSkipped, float64(n), t.Topic, group)
		}
	}
}
