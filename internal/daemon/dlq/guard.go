package dlq

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// GuardReplays wraps sink, the dead-letter sink of the pipeline whose
// dead-letter topic r reads, so that a replayed record rejected again is
// not written there again: its dead letter is still in the topic (a
// replay changes nothing there), and writing another would make each
// replay of a rejected record grow the topic by as much again.
//
// A record counts as such a replay when its HeaderReplayOf names a dead
// letter of r's topic that is there and holds the same record: the same
// key, value and headers, leaving out those of streamd. A record that
// claims to be a replay but is not (its producer set the header) is
// written, and so is one of a replay with Force (HeaderReplayForce) and
// every record when the dead letters cannot be read (a duplicate rather
// than a loss). The wrapper keeps sink's pipeline.AsyncSink, Readier and
// Conditioner. Skipped counts the records not written again; each is
// logged.
func GuardReplays(sink plugins.Sink, r *Reader, log *slog.Logger) plugins.Sink {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &guard{sink: sink, r: r, log: log}
	if a, ok := sink.(pipeline.AsyncSink); ok {
		return &asyncGuard{g, a}
	}
	return g
}

// Skipped returns how many records a sink of GuardReplays did not write
// again (0 for any other sink).
func Skipped(sink plugins.Sink) int64 {
	switch g := sink.(type) {
	case *guard:
		return g.skipped.Load()
	case *asyncGuard:
		return g.skipped.Load()
	}
	return 0
}

type guard struct {
	sink    plugins.Sink
	r       *Reader
	log     *slog.Logger
	skipped atomic.Int64
}

type asyncGuard struct {
	*guard
	a pipeline.AsyncSink
}

func (g *guard) Write(ctx context.Context, batch []record.Record) ([]error, error) {
	keep, idx := g.filter(ctx, batch)
	errs := make([]error, len(batch))
	if len(keep) == 0 {
		return errs, nil
	}
	e, err := g.sink.Write(ctx, keep)
	if err != nil || len(e) != len(keep) {
		return e, err // the pipeline names a count that does not match
	}
	for j, i := range idx {
		errs[i] = e[j]
	}
	return errs, nil
}

func (g *asyncGuard) WriteAsync(ctx context.Context, batch []record.Record, done func(errs []error, err error)) {
	keep, idx := g.filter(ctx, batch)
	if len(keep) == 0 {
		done(make([]error, len(batch)), nil)
		return
	}
	if len(keep) == len(batch) {
		g.a.WriteAsync(ctx, batch, done)
		return
	}
	g.a.WriteAsync(ctx, keep, func(e []error, err error) {
		if err != nil || len(e) != len(keep) {
			done(e, err)
			return
		}
		errs := make([]error, len(batch))
		for j, i := range idx {
			errs[i] = e[j]
		}
		done(errs, nil)
	})
}

// Ready is the sink's (pipeline.Readier), nil if it has none.
func (g *guard) Ready(ctx context.Context) error {
	if r, ok := g.sink.(pipeline.Readier); ok {
		return r.Ready(ctx)
	}
	return nil
}

// Condition is the sink's (pipeline.Conditioner), nil if it has none.
func (g *guard) Condition() error {
	if c, ok := g.sink.(pipeline.Conditioner); ok {
		return c.Condition()
	}
	return nil
}

// filter returns the dead letters of batch to write, and the index in
// batch of each.
func (g *guard) filter(ctx context.Context, batch []record.Record) ([]record.Record, []int) {
	var cand []int
	want := map[int32][]int64{}
	for i := range batch {
		if pos, ok := g.replayOf(&batch[i]); ok {
			cand = append(cand, i)
			want[pos.Partition] = append(want[pos.Partition], pos.Offset)
		}
	}
	all := func() ([]record.Record, []int) {
		idx := make([]int, len(batch))
		for i := range idx {
			idx[i] = i
		}
		return batch, idx
	}
	if len(cand) == 0 {
		return all()
	}
	held, err := g.r.entries(ctx, want)
	if err != nil {
		g.log.Warn("replayed records rejected again: the dead letters they came from cannot be read; dead-lettering them again", "dlq", g.r.topic, "records", len(cand), "err", err)
		return all()
	}
	skip := map[int]bool{}
	for _, i := range cand {
		pos, _ := g.replayOf(&batch[i])
		e, ok := held[[2]int64{int64(pos.Partition), pos.Offset}]
		if !ok || !sameRecord(&batch[i], &e.Record) {
			continue
		}
		skip[i] = true
		count, _ := batch[i].Header(HeaderReplayCount)
		errText, _ := batch[i].Header(pipeline.HeaderError)
		g.log.Warn("replayed record rejected again; its dead letter is kept, not written again (replay with force to write it again)",
			"dead_letter", pos.String(), "replays", string(count), "err", string(errText))
	}
	if len(skip) == 0 {
		return all()
	}
	g.skipped.Add(int64(len(skip)))
	keep := make([]record.Record, 0, len(batch)-len(skip))
	idx := make([]int, 0, len(batch)-len(skip))
	for i := range batch {
		if !skip[i] {
			keep = append(keep, batch[i])
			idx = append(idx, i)
		}
	}
	return keep, idx
}

// replayOf is the dead letter of g's topic that r says it replays, unless
// r is of a forced replay.
func (g *guard) replayOf(r *record.Record) (Position, bool) {
	v, ok := r.Header(HeaderReplayOf)
	if !ok {
		return Position{}, false
	}
	if _, force := r.Header(HeaderReplayForce); force {
		return Position{}, false
	}
	pos, ok := parsePosition(string(v))
	return pos, ok && pos.Topic == g.r.topic
}

// parsePosition parses Position.String's "TOPIC/PARTITION@OFFSET".
func parsePosition(s string) (Position, bool) {
	slash := strings.LastIndexByte(s, '/')
	if slash < 0 {
		return Position{}, false
	}
	p, o, ok := strings.Cut(s[slash+1:], "@")
	pn, err1 := strconv.ParseInt(p, 10, 32)
	on, err2 := strconv.ParseInt(o, 10, 64)
	if !ok || err1 != nil || err2 != nil || pn < 0 || on < 0 {
		return Position{}, false
	}
	return Position{Topic: s[:slash], Partition: int32(pn), Offset: on}, true
}

// sameRecord reports whether dead letter d (about to be written) and dead
// letter held (in the topic) hold the same record: key, value and the
// headers that are not streamd's.
func sameRecord(d, held *record.Record) bool {
	if !bytes.Equal(d.Key, held.Key) || !bytes.Equal(d.Value, held.Value) || (d.Value == nil) != (held.Value == nil) {
		return false
	}
	own := func(r *record.Record) []record.Header {
		return slices.DeleteFunc(slices.Clone(r.Headers), func(h record.Header) bool { return strings.HasPrefix(h.Key, "streamd-") })
	}
	a, b := own(d), own(held)
	return slices.EqualFunc(a, b, func(x, y record.Header) bool { return x.Key == y.Key && bytes.Equal(x.Value, y.Value) })
}

// entries reads the entries at the offsets want names, per partition:
// one scan of each partition from the lowest offset to the highest.
func (r *Reader) entries(ctx context.Context, want map[int32][]int64) (map[[2]int64]Entry, error) {
	parts := make([]int32, 0, len(want))
	for p := range want {
		parts = append(parts, p)
	}
	ranges, err := r.Ranges(ctx, Filter{Partitions: parts})
	if err != nil {
		return nil, err
	}
	out := map[[2]int64]Entry{}
	for _, rg := range ranges {
		offs := want[rg.Partition]
		lo, hi := slices.Min(offs), slices.Max(offs)+1
		rg.Start, rg.End = max(rg.Start, lo), min(rg.End, hi)
		if rg.Start >= rg.End {
			continue
		}
		err := r.Scan(ctx, []Range{rg}, Filter{}, func(e *Entry) error {
			if slices.Contains(offs, e.Offset) {
				out[[2]int64{int64(e.Partition), e.Offset}] = *e
			}
			return nil
		}, nil)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
