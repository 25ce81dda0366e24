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
	a := &App{log: slog.New(slog.DiscardHandler), phase: phaseRunning}
	u := &unit{name: "p", p: pipeline.New("p", pipelinetest.NewSource(1, 1, 1), plugins.SinkFunc(nil))}
	end := func(err error, cancelled bool) {
		u.state, u.done = unitRunning, make(chan struct{})
		a.ended(u, err, cancelled, nil)
		if u.timer != nil {
			u.timer.Stop()
		}
	}
	txnErr := fmt.Errorf("pipeline p: %w", fmt.Errorf("sink %w: gone", pipeline.ErrTxnWrite))
	for _, c := range []struct {
		name      string
		err       error
		cancelled bool
	}{
		{"no error", nil, false},
		{"another failure", errors.New("policy stop"), false},
		{"stopped from outside", txnErr, true},
	} {
		if end(c.err, c.cancelled); !u.restartAt.IsZero() {
			t.Errorf("%s: restarts after %v", c.name, u.backoff)
		}
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i, w := range want {
		end(txnErr, false)
		if u.restartAt.IsZero() || u.backoff != w*time.Second {
			t.Fatalf("restart %d: after %v (due %v), want %v", i+1, u.backoff, u.restartAt, w*time.Second)
		}
	}
	if u.state != unitEnded || u.restartCause != txnErr.Error() {
		t.Fatalf("pending restart: state %v cause %q", u.state, u.restartCause)
	}
}
