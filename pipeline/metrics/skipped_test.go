package metrics_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/metrics"
	"github.com/streamd/streamd/pipeline/pipelinetest"
)

// skippingSource says it skipped records (retention deleted them).
type skippingSource struct{ *pipelinetest.Source }

func (skippingSource) Skipped() map[string]int64 { return map[string]int64{"in/0": 870000, "in/3": 12} }

// TestSkippedRecords: records a source skipped unread (pipeline.Skipper)
// are in Status and in streamd_source_records_skipped_total per partition
// (the regression: a backlog deleted by retention was skipped without a trace).
func TestSkippedRecords(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	p := pipeline.New("t", skippingSource{pipelinetest.NewSource(1, 1, 1)}, &pipelinetest.Sink{}, pipeline.WithObserver(m))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := p.Status(); s.Skipped["in/0"] != 870000 || s.Skipped["in/3"] != 12 {
		t.Fatalf("status skipped %v", s.Skipped)
	}
	got := gather(t, reg)
	if got["streamd_source_records_skipped_total{partition=0,pipeline=t,topic=in}"] != 870000 ||
		got["streamd_source_records_skipped_total{partition=3,pipeline=t,topic=in}"] != 12 {
		t.Fatalf("metrics %v", got)
	}
}
