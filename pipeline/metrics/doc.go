// Package metrics exports pipelines' metrics to Prometheus, all named
// streamd_*: a pipeline.Observer (pass it with pipeline.WithObserver) and a
// prometheus.Collector. One Metrics serves many pipelines, labelled by
// name.
//
// The counters and gauges are read from each pipeline's Status when
// Prometheus collects (the pipeline counts every event once, itself); the
// batch duration histogram is fed by ObserveBatch.
package metrics
