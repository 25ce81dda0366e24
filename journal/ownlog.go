package journal

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/streamd/streamd/journal/internal/action"
)

// ownWindow is how far back (in offsets of a partition) a Journal
// remembers the action records it produced.
const ownWindow = 1 << 16

// ownWait bounds how long a check waits for this Journal's own records
// still being produced to fill a gap before it reads Kafka instead.
const ownWait = 50 * time.Millisecond

// ownLog remembers the action records this Journal produced, by partition:
// which offsets (as merged intervals) and, per journal id, the actions, so
// that an Append's check needs no read of Kafka when every record between
// its base and itself is one of them: the usual case when one process
// writes a journal topic.
type ownLog struct {
	mu       sync.Mutex
	parts    map[partKey]*ownPart
	inflight map[string]int // produces under way, by topic
	changed  chan struct{}  // closed and replaced when a produce ends
}

type ownPart struct {
	ivs  []interval              // offsets produced, merged, by lo
	keys map[string][]headAction // by offset
	high int64                   // the highest offset added
	adds int                     // since the last sweep of keys
}

// interval is the offsets lo..hi (inclusive).
type interval struct{ lo, hi int64 }

// start notes a produce to topic under way; done ends it.
func (l *ownLog) start(topic string) {
	l.mu.Lock()
	if l.inflight == nil {
		l.inflight = map[string]int{}
	}
	l.inflight[topic]++
	l.mu.Unlock()
}

// done ends a produce to topic started with start; if ok, the record of
// id with header h is remembered at partition/offset.
func (l *ownLog) done(topic string, ok bool, partition int32, offset int64, id string, h action.Header) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[topic]--; l.inflight[topic] <= 0 {
		delete(l.inflight, topic)
	}
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	if !ok {
		return
	}
	if l.parts == nil {
		l.parts = map[partKey]*ownPart{}
	}
	pk := partKey{topic, partition}
	p := l.parts[pk]
	if p == nil {
		p = &ownPart{keys: map[string][]headAction{}}
		l.parts[pk] = p
	}
	p.add(offset)
	if h.Kind != action.KindMark {
		if h.Kind == action.KindAppend {
			h.Metadata = nil // only the range counts here
		}
		// Kept in offset order (acks can come out of order).
		acts := p.keys[id]
		i := len(acts)
		for i > 0 && acts[i-1].offset > offset {
			i--
		}
		p.keys[id] = slices.Insert(acts, i, headAction{offset: offset, header: h})
	}
	p.high = max(p.high, offset)
	if p.adds++; p.adds >= ownWindow {
		p.sweep()
	}
}

// add inserts offset into the intervals.
func (p *ownPart) add(off int64) {
	n := len(p.ivs)
	if n > 0 && p.ivs[n-1].hi+1 == off { // the usual case
		p.ivs[n-1].hi = off
		return
	}
	i, _ := slices.BinarySearchFunc(p.ivs, off, func(iv interval, o int64) int { return cmp.Compare(iv.lo, o) })
	// p.ivs[i-1].lo < off <= p.ivs[i].lo
	if i > 0 && p.ivs[i-1].hi >= off || i < n && p.ivs[i].lo == off {
		return // already there
	}
	joinPrev := i > 0 && p.ivs[i-1].hi+1 == off
	joinNext := i < n && p.ivs[i].lo-1 == off
	switch {
	case joinPrev && joinNext:
		p.ivs[i-1].hi = p.ivs[i].hi
		p.ivs = slices.Delete(p.ivs, i, i+1)
	case joinPrev:
		p.ivs[i-1].hi = off
	case joinNext:
		p.ivs[i].lo = off
	default:
		p.ivs = slices.Insert(p.ivs, i, interval{off, off})
	}
}

// sweep forgets what is more than ownWindow below the highest offset.
func (p *ownPart) sweep() {
	p.adds = 0
	low := p.high - ownWindow
	i := 0
	for i < len(p.ivs) && p.ivs[i].hi < low {
		i++
	}
	p.ivs = slices.Delete(p.ivs, 0, i)
	if len(p.ivs) > 0 && p.ivs[0].lo < low {
		p.ivs[0].lo = low
	}
	for id, acts := range p.keys {
		acts = slices.DeleteFunc(acts, func(a headAction) bool { return a.offset < low })
		if len(acts) == 0 {
			delete(p.keys, id)
		} else {
			p.keys[id] = acts
		}
	}
}

// missing counts the offsets of from..to that are not in the intervals.
func (p *ownPart) missing(from, to int64) int64 {
	n := to - from + 1
	i, _ := slices.BinarySearchFunc(p.ivs, from, func(iv interval, o int64) int { return cmp.Compare(iv.hi, o) })
	for ; i < len(p.ivs) && p.ivs[i].lo <= to; i++ {
		n -= min(p.ivs[i].hi, to) - max(p.ivs[i].lo, from) + 1
	}
	return n
}

// onlyOurs reports whether every record of topic/partition from offset
// from on, as far as this Journal has produced, may be one of its own:
// no more are missing than it has produces under way.
func (l *ownLog) onlyOurs(topic string, partition int32, from int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.parts[partKey{topic, partition}]
	if p == nil || from < p.high-ownWindow {
		return false
	}
	return from > p.high || p.missing(from, p.high) <= int64(l.inflight[topic])
}

// actions returns id's actions at offsets from..to of topic/partition, in
// offset order, if every record there is one this Journal produced (ok),
// else ok false. Gaps that this Journal's produces still under way could
// fill (no more of them than of those) are waited for, up to ownWait.
func (l *ownLog) actions(ctx context.Context, topic string, partition int32, id string, from, to int64) (acts []headAction, ok bool) {
	var deadline <-chan time.Time
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		p := l.parts[partKey{topic, partition}]
		if p == nil || from < p.high-ownWindow {
			return nil, false
		}
		missing := p.missing(from, to)
		if missing == 0 {
			all := p.keys[id]
			lo, _ := slices.BinarySearchFunc(all, from, func(a headAction, off int64) int { return cmp.Compare(a.offset, off) })
			for _, a := range all[lo:] {
				if a.offset > to {
					break
				}
				acts = append(acts, a)
			}
			return acts, true
		}
		if missing > int64(l.inflight[topic]) {
			return nil, false // someone else's records
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		if deadline == nil {
			t := time.NewTimer(ownWait)
			defer t.Stop()
			deadline = t.C
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			l.mu.Lock()
			return nil, false
		case <-ctx.Done():
			l.mu.Lock()
			return nil, false
		}
		l.mu.Lock()
	}
}
