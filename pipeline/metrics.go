package pipeline

import (
	"math"
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
	stallDesc *prometheus.Desc
	readyDesc *prometheus.Desc
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
		lagDesc: prometheus.NewDesc("streamd_consumer_lag", "Records in the source partition not yet consumed; NaN while it cannot be measured (broker unreachable).",
			[]string{"pipeline", "topic", "partition"}, nil),
		stallDesc: prometheus.NewDesc("streamd_pipeline_stalled", "1 while the pipeline has work pending and makes no progress (its stall timeout passed).", []string{"pipeline"}, nil),
		readyDesc: prometheus.NewDesc("streamd_pipeline_ready", "1 while the pipeline is ready (what /readyz says for it).", []string{"pipeline"}, nil),
	}
	reg.MustRegister(m.in, m.out, m.dlq, m.dropped, m.retries, m.errors, m.batch, m.inflight, m)
	return m
}

func (m *Metrics) add(p *Pipeline) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pipelines = append(m.pipelines, p)
}

// Describe implements prometheus.Collector for the lag, stall and ready
// gauges.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.lagDesc
	ch <- m.stallDesc
	ch <- m.readyDesc
}

// Collect implements prometheus.Collector for the lag, stall and ready
// gauges, from each pipeline's Status.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	ps := append([]*Pipeline(nil), m.pipelines...)
	m.mu.Unlock()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, p := range ps {
		s := p.Status()
		ch <- prometheus.MustNewConstMetric(m.stallDesc, prometheus.GaugeValue, b(s.Stalled), p.name)
		ch <- prometheus.MustNewConstMetric(m.readyDesc, prometheus.GaugeValue, b(s.Ready), p.name)
		for tp, lag := range s.Lag {
			topic, part, _ := strings.Cut(tp, "/")
			v := float64(lag)
			if lag < 0 {
				v = math.NaN()
			}
			ch <- prometheus.MustNewConstMetric(m.lagDesc, prometheus.GaugeValue, v, p.name, topic, part)
		}
	}
}
