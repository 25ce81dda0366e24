package app

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
)

// TestAutoRestartBackoff: only a write failed inside a transaction, of a
// run not stopped from outside, restarts by itself; the backoff doubles
// from restartMin to restartMax while runs commit nothing.
func TestAutoRestartBackoff(t *testing.T) {
	a := &App{log: slog.New(slog.DiscardHandler)}
	u := &unit{name: "p", p: pipeline.New("p", pipelinetest.NewSource(1, 1, 1), plugins.SinkFunc(nil))}
	txnErr := fmt.Errorf("pipeline p: %w", fmt.Errorf("sink %w: gone", pipeline.ErrTxnWrite))
	for _, c := range []struct {
		name  string
		err   error
		ended bool
	}{
		{"no error", nil, false},
		{"another failure", errors.New("policy stop"), false},
		{"stopped from outside", txnErr, true},
	} {
		if d, ok := a.autoRestart(u, c.err, c.ended); ok {
			t.Errorf("%s: restarts after %v", c.name, d)
		}
	}
	if !u.restartAt.IsZero() {
		t.Fatal("restart pending after no restart")
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i, w := range want {
		d, ok := a.autoRestart(u, txnErr, false)
		if !ok || d != w*time.Second {
			t.Fatalf("restart %d: %v %v, want %v", i+1, d, ok, w*time.Second)
		}
	}
	if u.restartAt.IsZero() || u.restartCause != txnErr.Error() {
		t.Fatalf("pending restart: at %v cause %q", u.restartAt, u.restartCause)
	}
}
