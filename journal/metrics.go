package journal

import "github.com/prometheus/client_golang/prometheus"

var (
	descRecords = prometheus.NewDesc("streamd_journal_replicator_records_total",
		"Action records the journal replicator handled, by outcome (applied, skipped: already in the store, ignored: not an action, quarantined: malformed, conflict: an Append not above its journal's seqNr, not applied).",
		[]string{"outcome"}, nil)
	descEvents  = prometheus.NewDesc("streamd_journal_replicator_events_total", "Events written to the journal store.", nil, nil)
	descBatches = prometheus.NewDesc("streamd_journal_replicator_batches_total", "Store transactions (one per partition per Write).", nil, nil)
)

// Collector returns a Prometheus collector of the Replicator's counters
// (register it once on the admin server's registry).
func (r *Replicator) Collector() prometheus.Collector { return replicatorCollector{r} }

type replicatorCollector struct{ r *Replicator }

func (c replicatorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRecords
	ch <- descEvents
	ch <- descBatches
}

func (c replicatorCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.Stats()
	applied := s.Records - s.Skipped - s.Ignored - s.Quarantined - s.Conflicts
	for _, m := range []struct {
		outcome string
		n       int64
	}{{"applied", applied}, {"skipped", s.Skipped}, {"ignored", s.Ignored}, {"quarantined", s.Quarantined}, {"conflict", s.Conflicts}} {
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(m.n), m.outcome)
	}
	ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(s.Events))
	ch <- prometheus.MustNewConstMetric(descBatches, prometheus.CounterValue, float64(s.Batches))
}
