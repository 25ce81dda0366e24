package pipeline_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
)

// answeringSource is a lagSource that says when its broker last answered.
type answeringSource struct {
	*lagSource
	answer atomic.Int64 // unix ns
}

func (s *answeringSource) LastAnswer() time.Time { return time.Unix(0, s.answer.Load()) }

// TestStallClockStartsAtLastAnswer: an idle pipeline whose broker stops
// answering (frozen, cut off) is stalled the stall timeout after the last
// answer, though its lag still looks known (a Kafka source keeps the last
// lag for 15 s), and ready again once the broker answers. The regression: with a
// frozen broker /readyz said 503 only 15 s + stall_timeout into the fault,
// when the lag turned unknown and the clock started. On synctest's fake
// clock, so the bound is tight.
func TestStallClockStartsAtLastAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stallTimeout = 500 * time.Millisecond
		src := &answeringSource{lagSource: &lagSource{Source: pipelinetest.NewSource(2, 20, 20)}}
		src.Block = true
		src.set(pipeline.LagMap{"in/0": 0, "in/1": 0}, nil)
		src.answer.Store(time.Now().UnixNano())
		answering := atomic.Bool{}
		answering.Store(true)
		stop := make(chan struct{})
		defer close(stop)
		go func() { // the broker answers an idle fetch every 20 ms
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if answering.Load() {
					src.answer.Store(time.Now().UnixNano())
				}
			}
		}()
		p := pipeline.New("t", src, &pipelinetest.Sink{}, append(fast(), pipeline.WithStallTimeout(stallTimeout))...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		waitStatus(t, p, "all written", func(s pipeline.Status) bool { return s.Out == 40 && s.InFlight == 0 })

		// Idle and answered: ready for several stall timeouts.
		for end := time.Now().Add(3 * stallTimeout); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if s := p.Status(); !s.Ready || s.Stalled {
				t.Fatalf("idle pipeline whose broker answers reported %+v", s)
			}
		}
		// The broker freezes: the lag stays known (0), nothing is in flight.
		answering.Store(false)
		last := src.LastAnswer()
		s := waitStatus(t, p, "stalled after the broker stopped answering", func(s pipeline.Status) bool { return s.Stalled })
		at := time.Since(last)
		t.Logf("stalled %s after the last answer: %s", at.Round(time.Millisecond), s.Reason)
		if at < stallTimeout {
			t.Errorf("stalled %s after the last answer, before the stall timeout (%v)", at, stallTimeout)
		}
		// On the fake clock only the broker's 20 ms answers and the 10 ms
		// polling of Status add to the stall timeout.
		if at > stallTimeout+50*time.Millisecond {
			t.Errorf("stalled only %s after the last answer (stall timeout %v)", at, stallTimeout)
		}
		if s.Ready || !strings.Contains(s.Reason, "no answer from the source's brokers for") {
			t.Errorf("stalled status %+v", s)
		}
		answering.Store(true)
		waitStatus(t, p, "ready once the broker answers again", func(s pipeline.Status) bool { return s.Ready && !s.Stalled })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
