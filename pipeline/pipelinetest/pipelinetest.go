package pipelinetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// Topic is the topic of the records NewSource makes.
const Topic = "in"

// Source is a pipeline.Source (and pipeline.BatchLiveness) of records held in
// memory.
type Source struct {
	// Block makes Fetch block until its context is done once every record
	// was fetched, as a Kafka poll does, instead of returning io.EOF.
	Block bool

	mu       sync.Mutex
	pending  []pipeline.Msg
	chunk    int
	acked    map[int32][]int64
	dead     map[int32]bool
	fetched  atomic.Int64
	ackedN   atomic.Int64
	commits  atomic.Int64
	maxAhead atomic.Int64
}

// NewSource returns a Source of perPartition records in each of partitions
// partitions of Topic, interleaved by offset (offset 0 of every partition,
// then offset 1, ...), served chunk records per Fetch. The record at offset o
// of partition p has key "k<o>" and value "v<p>-<o>".
func NewSource(partitions int32, perPartition, chunk int) *Source {
	s := &Source{chunk: max(1, chunk), acked: map[int32][]int64{}, dead: map[int32]bool{}}
	for o := range perPartition {
		for p := range partitions {
			s.pending = append(s.pending, pipeline.Msg{Record: record.Record{
				Topic: Topic, Partition: p, Offset: int64(o), Key: fmt.Appendf(nil, "k%d", o), Value: fmt.Appendf(nil, "v%d-%d", p, o),
			}})
		}
	}
	return s
}

// NewSourceOf returns a Source of recs, in this order, served chunk records
// per Fetch.
func NewSourceOf(chunk int, recs ...record.Record) *Source {
	s := &Source{chunk: max(1, chunk), acked: map[int32][]int64{}, dead: map[int32]bool{}}
	for _, r := range recs {
		s.pending = append(s.pending, pipeline.Msg{Record: r})
	}
	return s
}

// Record returns the record at offset of partition not fetched yet, to be
// changed before the pipeline runs; it panics if there is none.
func (s *Source) Record(partition int32, offset int64) *record.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.pending {
		if r := &s.pending[i].Record; r.Partition == partition && r.Offset == offset {
			return r
		}
	}
	panic(fmt.Sprintf("pipelinetest: no record %d@%d pending", partition, offset))
}

// Kill makes partition's records stale (revoked): the pipeline must drop
// them and never acknowledge them.
func (s *Source) Kill(partition int32) {
	s.mu.Lock()
	s.dead[partition] = true
	s.mu.Unlock()
}

// Fetch implements pipeline.Source.
func (s *Source) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	s.mu.Lock()
	if len(s.pending) == 0 {
		s.mu.Unlock()
		if s.Block {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, io.EOF
	}
	n := min(s.chunk, len(s.pending))
	out := slices.Clone(s.pending[:n])
	s.pending = s.pending[n:]
	s.mu.Unlock()
	ahead := s.fetched.Add(int64(n)) - s.ackedN.Load()
	for {
		m := s.maxAhead.Load()
		if ahead <= m || s.maxAhead.CompareAndSwap(m, ahead) {
			break
		}
	}
	return out, nil
}

// FilterLive implements pipeline.BatchLiveness.
func (s *Source) FilterLive(msgs []pipeline.Msg) []pipeline.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dead) == 0 {
		return msgs
	}
	live := make([]pipeline.Msg, 0, len(msgs))
	for _, m := range msgs {
		if !s.dead[m.Record.Partition] {
			live = append(live, m)
		}
	}
	return live
}

// Ack implements pipeline.Source.
func (s *Source) Ack(msgs []pipeline.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.acked[m.Record.Partition] = append(s.acked[m.Record.Partition], m.Record.Offset)
	}
	s.ackedN.Add(int64(len(msgs)))
}

// Commit implements pipeline.Source; it counts the calls.
func (s *Source) Commit(context.Context) error { s.commits.Add(1); return nil }

// Close implements pipeline.Source.
func (s *Source) Close(context.Context) error { return nil }

// Acked returns the acknowledged offsets of partition, in acknowledgement
// order.
func (s *Source) Acked(partition int32) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acked[partition])
}

// AckedN returns how many records were acknowledged.
func (s *Source) AckedN() int64 { return s.ackedN.Load() }

// Fetched returns how many records were fetched.
func (s *Source) Fetched() int64 { return s.fetched.Load() }

// Commits returns how many times Commit was called.
func (s *Source) Commits() int64 { return s.commits.Load() }

// MaxAhead returns the most records fetched and not yet acknowledged seen
// right after a fetch.
func (s *Source) MaxAhead() int64 { return s.maxAhead.Load() }

// ErrUnavailable is the error of a Sink's failed whole writes (FailFirst).
var ErrUnavailable = errors.New("pipelinetest: broker unavailable")

// Sink is a plugins.Sink that keeps the records it is written, in order.
// Set its fields before the pipeline runs.
type Sink struct {
	// FailFirst fails the first FailFirst writes whole with ErrUnavailable.
	FailFirst int
	// Reject, if set, is asked about every record; a record it returns an
	// error for is not kept and gets that error.
	Reject func(r *record.Record) error
	// Delay is slept at the start of every write.
	Delay time.Duration

	mu    sync.Mutex
	recs  []record.Record
	calls int
}

// Write implements plugins.Sink.
func (m *Sink) Write(ctx context.Context, batch []record.Record) ([]error, error) {
	if m.Delay > 0 {
		t := time.NewTimer(m.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.calls <= m.FailFirst {
		return nil, ErrUnavailable
	}
	errs := make([]error, len(batch))
	for i := range batch {
		if m.Reject != nil {
			if errs[i] = m.Reject(&batch[i]); errs[i] != nil {
				continue
			}
		}
		m.recs = append(m.recs, batch[i])
	}
	return errs, nil
}

// Records returns the records kept, in write order.
func (m *Sink) Records() []record.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.recs)
}

// Len returns how many records were kept.
func (m *Sink) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// Calls returns how many times Write was called.
func (m *Sink) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// ByPartition returns the values kept, per partition, in write order.
func (m *Sink) ByPartition() map[int32][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32][]string{}
	for _, r := range m.recs {
		out[r.Partition] = append(out[r.Partition], string(r.Value))
	}
	return out
}

// OutOfOrder checks that recs keep each partition's order, allowing replays:
// for every partition, the last copy of each offset comes after the last
// copy of every lower offset (a consumer that keeps the latest value per key
// ends in the source's order). It returns a description of the first
// violation, or "".
func OutOfOrder(recs []record.Record) string {
	type tp struct {
		topic string
		part  int32
	}
	last := map[tp]map[int64]int{} // offset -> index of its last copy
	for i, r := range recs {
		k := tp{r.Topic, r.Partition}
		if last[k] == nil {
			last[k] = map[int64]int{}
		}
		last[k][r.Offset] = i
	}
	for k, m := range last {
		offs := make([]int64, 0, len(m))
		for o := range m {
			offs = append(offs, o)
		}
		slices.Sort(offs)
		for j := 1; j < len(offs); j++ {
			if m[offs[j]] < m[offs[j-1]] {
				return fmt.Sprintf("%s/%d: the last copy of offset %d (at %d) is before the last copy of offset %d (at %d)",
					k.topic, k.part, offs[j], m[offs[j]], offs[j-1], m[offs[j-1]])
			}
		}
	}
	return ""
}
