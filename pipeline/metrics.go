package pipeline

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus metrics of a set of pipelines, all named
// streamd_*. One Metrics serves many pipelines (labelled by name).
type Metrics struct {
	in, out, dlq, dropped, retries *prometheus.CounterVec
	errors                         *prometheus.CounterVec
	batch                          *prometheus.HistogramVec
	inflight                       *prometheus.GaugeVec

	mu        sync.Mutex
	pipelines []*Pipeline
	lagDesc   *prometheus.Desc
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"pipeline"}, labels...))
	}
	m := &Metrics{
		in:      counter("streamd_records_in_total", "Records read by the source."),
		out:     counter("streamd_records_out_total", "Records written by the sink."),
		dlq:     counter("streamd_records_dlq_total", "Input records sent to the dead-letter queue."),
		dropped: counter("streamd_records_dropped_total", "Input records dropped by the error policy or a partition revoke."),
		retries: counter("streamd_sink_retries_total", "Sink writes and stage calls retried after a transient error."),
		errors:  counter("streamd_errors_total", "Records rejected, by stage (\"sink\" for the sink).", "stage"),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamd_batch_duration_seconds", Help: "Time from a batch's processing start to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"pipeline"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "streamd_records_in_flight", Help: "Records read and not yet acknowledged."}, []string{"pipeline"}),
		lagDesc:  prometheus.NewDesc("streamd_consumer_lag", "Records in the source partition not yet consumed.", []string{"pipeline", "topic", "partition"}, nil),
	}
	reg.MustRegister(m.in, m.out, m.dlq, m.dropped, m.retries, m.errors, m.batch, m.inflight, m)
	return m
}

func (m *Metrics) add(p *Pipeline) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pipelines = append(m.pipelines, p)
}

// Describe implements prometheus.Collector for the lag gauges.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.lagDesc }

// Collect implements prometheus.Collector for the lag gauges.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	ps := append([]*Pipeline(nil), m.pipelines...)
	m.mu.Unlock()
	for _, p := range ps {
		l, ok := p.src.(Lagger)
		if !ok {
			continue
		}
		for tp, lag := range l.Lag() {
			topic, part, _ := strings.Cut(tp, "/")
			ch <- prometheus.MustNewConstMetric(m.lagDesc, prometheus.GaugeValue, float64(lag), p.name, topic, part)
		}
	}
}
