package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
)

// TestPipeline is one pipeline of a config as `streamd test` runs it: its
// stages with their plugins and limits, batching, retries and error policy,
// as Build assembles them, but reading Source and writing to Sink instead of
// the configured source and sink, and dead letters (policy dlq) to DLQ.
type TestPipeline struct {
	*pipeline.Pipeline
	app *App
}

// Close releases the pipeline's plugins and its source, by ctx (in 10 s
// if ctx has no deadline).
func (t *TestPipeline) Close(ctx context.Context) error { return t.app.Close(ctx) }

// BuildTest assembles pipeline i of cfg for a test: see TestPipeline. It
// runs one worker, so that records reach sink in the order of src (a
// pipeline with more workers keeps that order only per partition), and
// connects to nothing.
func BuildTest(ctx context.Context, cfg *config.Config, i int, log *slog.Logger, open plugins.OpenFunc,
	src pipeline.Source, sink, dlq plugins.Sink) (*TestPipeline, error) {
	a := &App{cfg: cfg, log: log, open: open, stdout: io.Discard, reg: prometheus.NewRegistry(), cl: newClientCache()}
	a.closers = append(a.closers, src.Close)
	pc := &cfg.Pipelines[i]
	var stages []pipeline.Stage
	for j := range pc.Transforms {
		st, err := a.buildStage(ctx, pc, j)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", a.where(i, fmt.Sprintf("transform[%d]", j)), err), a.Close(context.WithoutCancel(ctx)))
		}
		stages = append(stages, st)
	}
	// Never paused (a pipeline with paused = true is tested all the same).
	opts := append(a.pipelineOptions(pc, stages), pipeline.WithWorkers(1), pipeline.WithPaused(false))
	switch pc.Errors.Policy {
	case "dlq":
		opts = append(opts, pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq))
	case "drop":
		opts = append(opts, pipeline.WithErrorPolicy(pipeline.PolicyDrop, nil))
	default:
		opts = append(opts, pipeline.WithErrorPolicy(pipeline.PolicyStop, nil))
	}
	return &TestPipeline{Pipeline: pipeline.New(pc.Name, src, sink, opts...), app: a}, nil
}
