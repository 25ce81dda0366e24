package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// TestRunEndsWithItsPipelines: a daemon whose pipelines have all ended
// returns from Run by itself. A unit once told Run it had ended before it
// marked itself done, so Run could find it still running, wait for a
// signal that never came, and stay up until SIGTERM.
func TestRunEndsWithItsPipelines(t *testing.T) {
	for i := range 5000 {
		a := &App{log: slog.New(slog.DiscardHandler), cfg: &config.Config{}}
		sink := plugins.SinkFunc(func(_ context.Context, b []record.Record) ([]error, error) { return make([]error, len(b)), nil })
		a.units = []*unit{{name: "p", built: true, p: pipeline.New("p", pipelinetest.NewSource(1, 1, 1), sink)}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := a.runUnits(ctx)
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("run %d: Run did not return when its only pipeline ended (err %v)", i, err)
		}
	}
}
