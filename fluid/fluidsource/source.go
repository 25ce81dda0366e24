// Package fluidsource makes a streamd pipeline a Fluid Messaging consumer:
// it adapts a fluid.Consumer to pipeline.Source, for
//
//	[pipeline.source]
//	type = "kafka"
//	topics = ["orders"]
//	group = "billing"
//	[pipeline.source.fluid]
//	compatible_version = 3
//
// The pipeline then never sees a record newer than its compatible version:
// at the first incompatible record it reads the bridge's downgrade topic.
package fluidsource

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// Source is a pipeline.Source reading through a fluid.Consumer.
type Source struct {
	c   *fluid.Consumer
	log *slog.Logger
}

// New registers with the bridge and joins the group (see fluid.NewConsumer).
func New(ctx context.Context, cfg fluid.ConsumerConfig) (*Source, error) {
	c, err := fluid.NewConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Source{c: c, log: log}, nil
}

// Consumer returns the underlying consumer.
func (s *Source) Consumer() *fluid.Consumer { return s.c }

// Fetch implements pipeline.Source. A bridge that does not answer
// (fluid.ErrBridgeUnavailable: unreachable, or its Kafka or Schema
// Registry cannot answer) is asked again with a backoff until ctx ends,
// reported as a warning, never a pipeline failure; records polled before
// it are returned first.
func (s *Source) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	backoff := 100 * time.Millisecond
	for {
		rs, err := s.c.Poll(ctx)
		if err != nil && errors.Is(err, fluid.ErrBridgeUnavailable) && ctx.Err() == nil {
			if len(rs) == 0 {
				s.log.Warn("fluid consumer: the bridge did not answer; asking again", "err", err, "retry_in", backoff)
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			err = nil // the rest stays pending: the next Fetch asks again
		}
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if len(rs) == 0 {
			continue
		}
		msgs := make([]pipeline.Msg, len(rs))
		for i, r := range rs {
			msgs[i] = pipeline.Msg{Record: r}
		}
		return msgs, nil
	}
}

// Ack implements pipeline.Source.
func (s *Source) Ack(msgs []pipeline.Msg) {
	rs := make([]record.Record, len(msgs))
	for i := range msgs {
		rs[i] = msgs[i].Record
	}
	s.c.Ack(rs)
}

// Commit implements pipeline.Source.
func (s *Source) Commit(ctx context.Context) error { return s.c.Commit(ctx) }

// Live implements pipeline.Liveness: records of partitions revoked from
// this member are stale.
func (s *Source) Live(m *pipeline.Msg) bool { return s.c.Live(&m.Record) }

// Close implements pipeline.Source: it closes the consumer (leaving the
// group) by ctx.
func (s *Source) Close(ctx context.Context) error { return s.c.Close(ctx) }

var (
	_ pipeline.Source   = (*Source)(nil)
	_ pipeline.Liveness = (*Source)(nil)
)
