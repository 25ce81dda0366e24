package pipeline_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/record"
)

// trickle is a bounded source (as the Kafka source is) that answers each
// FetchUpTo with the records sent to it since the last, at most n,
// blocking while there are none: a topic that records arrive in one at a
// time.
type trickle struct {
	mu     sync.Mutex
	recs   []record.Record
	wake   chan struct{}
	offset int64
}

func newTrickle() *trickle { return &trickle{wake: make(chan struct{}, 1)} }

func (s *trickle) send(v string) {
	s.mu.Lock()
	s.recs = append(s.recs, record.Record{Topic: "in", Offset: s.offset, Value: []byte(v)})
	s.offset++
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *trickle) FetchUpTo(ctx context.Context, n int) ([]pipeline.Msg, error) {
	for {
		s.mu.Lock()
		if len(s.recs) > 0 {
			k := min(n, len(s.recs))
			msgs := make([]pipeline.Msg, k)
			for i := range msgs {
				msgs[i].Record = s.recs[i]
			}
			s.recs = s.recs[k:]
			s.mu.Unlock()
			return msgs, nil
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *trickle) Fetch(ctx context.Context) ([]pipeline.Msg, error) { return s.FetchUpTo(ctx, 100) }
func (s *trickle) Ack([]pipeline.Msg)                                {}
func (s *trickle) Commit(context.Context) error                      { return nil }
func (s *trickle) Close(context.Context) error                       { return nil }

// TestBatchGoesWhenSourceIsDrained: a batch does not wait out its linger
// for records the source does not have: when a bounded source answers
// with fewer records than it was asked for, what was fetched is written
// at once, as a franz-go loop that produces and flushes what each poll
// returned does. A quiet topic's record waited the whole linger before
// (5 ms by default: most of a record's latency at a low rate).
func TestBatchGoesWhenSourceIsDrained(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			src := newTrickle()
			sink := &pipelinetest.Sink{}
			p := pipeline.New("t", src, sink, pipeline.WithWorkers(workers), pipeline.WithBatch(1024, 1<<20, time.Hour))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			for i := 0; i < 3; i++ {
				src.send(fmt.Sprint("v", i))
				deadline := time.Now().Add(10 * time.Second)
				for sink.Len() < i+1 {
					if time.Now().After(deadline) {
						t.Fatalf("record %d not written 10 s after it was fetched (batch linger 1 h, %d of %d written)", i, sink.Len(), i+1)
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
}
