package metrics

import (
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamd/streamd/pipeline"
)

// Metrics are the Prometheus metrics of a set of pipelines.
type Metrics struct {
	in, out, dlq, dropped, retries *prometheus.Desc
	errors, stageErrors, inflight  *prometheus.Desc
	lag, stalled, ready, skipped   *prometheus.Desc
	paused, wedged                 *prometheus.Desc
	txns                           *prometheus.Desc
	batch, txn                     *prometheus.HistogramVec

	mu        sync.Mutex
	pipelines []*pipeline.Pipeline
}

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"pipeline"}, labels...), nil)
	}
	m := &Metrics{
		in:      desc("streamd_records_in_total", "Records read by the source."),
		out:     desc("streamd_records_out_total", "Records written by the sink."),
		dlq:     desc("streamd_records_dlq_total", "Input records sent to the dead-letter queue."),
		dropped: desc("streamd_records_dropped_total", "Input records dropped by the error policy or a partition revoke."),
		retries: desc("streamd_sink_retries_total", "Sink writes and stage calls retried after a transient error."),
		errors:  desc("streamd_errors_total", "Records rejected, by stage (\"sink\" for the sink).", "stage"),
		stageErrors: desc("streamd_stage_errors_total", "Records rejected, by plugin (the stage's name for one without a plugin, \"sink\" for the sink) and kind: rejected, trap, timeout, memory or failed.",
			"plugin", "kind"),
		inflight: desc("streamd_records_in_flight", "Records read and not yet acknowledged."),
		lag: desc("streamd_consumer_lag", "Records in the source partition not yet consumed; NaN while it cannot be measured (broker unreachable).",
			"topic", "partition"),
		skipped: desc("streamd_source_records_skipped_total", "Records of the source partition skipped without being read: deleted by retention (OFFSET_OUT_OF_RANGE) before the pipeline got to them.",
			"topic", "partition"),
		stalled: desc("streamd_pipeline_stalled", "1 while the pipeline has work pending and makes no progress (its stall timeout passed)."),
		ready:   desc("streamd_pipeline_ready", "1 while the pipeline is ready (what /readyz says for it)."),
		paused:  desc("streamd_pipeline_paused", "1 while the pipeline is paused (streamd ctl pause, or paused = true): it fetches nothing and its lag grows."),
		wedged:  desc("streamd_pipeline_wedged", "1 while the pipeline is stalled with no outside cause (a plugin or sink that blocks): systemd's watchdog pings stop."),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamd_batch_duration_seconds", Help: "Time from a batch's processing start to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"pipeline"}),
		txns: desc("streamd_transactions_total", "Transactions of an exactly-once pipeline, by result (committed, aborted).", "result"),
		txn: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamd_transaction_duration_seconds", Help: "Time from a transaction's first record to its commit or abort (exactly-once pipelines).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"pipeline", "result"}),
	}
	reg.MustRegister(m)
	return m
}

// ObserveNew implements pipeline.NewObserver: p's metrics are collected
// from now on.
func (m *Metrics) ObserveNew(p *pipeline.Pipeline) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pipelines = append(m.pipelines, p)
}

// Remove stops collecting p's metrics: for a pipeline that was stopped for
// good or replaced (a config reload). A pipeline of the same name started
// later begins its counters at zero.
func (m *Metrics) Remove(p *pipeline.Pipeline) {
	m.mu.Lock()
	m.pipelines = slices.DeleteFunc(m.pipelines, func(q *pipeline.Pipeline) bool { return q == p })
	m.mu.Unlock()
	m.batch.DeletePartialMatch(prometheus.Labels{"pipeline": p.Name()})
	m.txn.DeletePartialMatch(prometheus.Labels{"pipeline": p.Name()})
}

// ObserveTxn implements pipeline.TxnObserver.
func (m *Metrics) ObserveTxn(t pipeline.TxnDone) {
	result := "committed"
	if !t.Committed {
		result = "aborted"
	}
	m.txn.WithLabelValues(t.Pipeline, result).Observe(t.Took.Seconds())
}

// ObserveBatch implements pipeline.BatchObserver.
func (m *Metrics) ObserveBatch(b pipeline.BatchDone) {
	m.batch.WithLabelValues(b.Pipeline).Observe(b.Took.Seconds())
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.in, m.out, m.dlq, m.dropped, m.retries, m.errors, m.stageErrors, m.inflight, m.lag, m.skipped, m.stalled, m.ready, m.paused, m.wedged, m.txns} {
		ch <- d
	}
	m.batch.Describe(ch)
	m.txn.Describe(ch)
}

// Collect implements prometheus.Collector, from each pipeline's Status.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	ps := slices.Clone(m.pipelines)
	m.mu.Unlock()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, p := range ps {
		s := p.Status()
		name := p.Name()
		counter := func(d *prometheus.Desc, v int64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{name}, labels...)...)
		}
		counter(m.in, s.In)
		counter(m.out, s.Out)
		counter(m.dlq, s.DLQ)
		counter(m.dropped, s.Dropped)
		counter(m.retries, s.Retries)
		for stage, n := range s.Rejected {
			counter(m.errors, n, stage)
		}
		for plugin, kinds := range s.ErrorKinds {
			for kind, n := range kinds {
				counter(m.stageErrors, n, plugin, kind)
			}
		}
		if x := s.Transactions; x != nil {
			counter(m.txns, x.Committed, "committed")
			counter(m.txns, x.Aborted, "aborted")
		}
		ch <- prometheus.MustNewConstMetric(m.inflight, prometheus.GaugeValue, float64(s.InFlight), name)
		ch <- prometheus.MustNewConstMetric(m.stalled, prometheus.GaugeValue, b(s.Stalled), name)
		ch <- prometheus.MustNewConstMetric(m.ready, prometheus.GaugeValue, b(s.Ready), name)
		ch <- prometheus.MustNewConstMetric(m.paused, prometheus.GaugeValue, b(s.Paused), name)
		ch <- prometheus.MustNewConstMetric(m.wedged, prometheus.GaugeValue, b(s.Wedged), name)
		for tp, lag := range s.Lag {
			topic, part, _ := strings.Cut(tp, "/")
			v := float64(lag)
			if lag < 0 {
				v = math.NaN()
			}
			ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, v, name, topic, part)
		}
		for tp, n := range s.Skipped {
			topic, part, _ := strings.Cut(tp, "/")
			counter(m.skipped, n, topic, part)
		}
	}
	m.batch.Collect(ch)
	m.txn.Collect(ch)
}
