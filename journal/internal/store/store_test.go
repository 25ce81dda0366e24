package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/streamd/streamd/journal/internal/action"
)

// An Append whose first seqNr is not above the journal's seqNr (or
// deleteTo) is a conflict: it writes nothing, changes no row, and is
// reported; the others of the same merged op still apply (kafka-journal's replicator would overwrite the stored events
// and move seqNr back).
func TestApplyKeyConflicts(t *testing.T) {
	ev := func(s int64, p string, off int64) Event {
		return Event{SeqNr: s, Kind: action.PayloadText, Payload: []byte(p), Offset: off}
	}
	part := func(off, from, to int64, p string) AppendPart {
		ap := AppendPart{Offset: off, From: from, To: to}
		for s := from; s <= to; s++ {
			ap.Events = append(ap.Events, ev(s, p, off))
		}
		return ap
	}
	for _, tc := range []struct {
		name          string
		meta          Meta
		exists        bool
		ops           []Op
		events        string
		seqNr, delTo  int64
		conflicts     string
		dirty         bool
		metaOffsetEnd int64
	}{
		{
			name: "overlap and below, one batch",
			ops: []Op{{Kind: action.KindAppend, Offset: 4, Parts: []AppendPart{
				part(1, 1, 3, "a"), part(2, 2, 4, "b"), part(3, 1, 1, "c"), part(4, 4, 5, "d"),
			}}},
			events: "1a 2a 3a 4d 5d", seqNr: 5, delTo: 0, conflicts: "2:2..4>3 3:1..1>3", dirty: true, metaOffsetEnd: 4,
		},
		{
			name:   "below a stored row",
			meta:   Meta{SeqNr: 7, DeleteTo: 2, Offset: 10},
			exists: true,
			ops:    []Op{{Kind: action.KindAppend, Offset: 11, Parts: []AppendPart{part(11, 7, 8, "x")}}},
			events: "", seqNr: 7, delTo: 2, conflicts: "11:7..8>7", dirty: false, metaOffsetEnd: 10,
		},
		{
			name:   "below a Delete that created the row",
			meta:   Meta{SeqNr: 3, DeleteTo: 3, Offset: 10},
			exists: true,
			ops:    []Op{{Kind: action.KindAppend, Offset: 12, Parts: []AppendPart{part(11, 2, 3, "x"), part(12, 4, 4, "y")}}},
			events: "4y", seqNr: 4, delTo: 3, conflicts: "11:2..3>3", dirty: true, metaOffsetEnd: 12,
		},
		{
			name:   "after a Purge any seqNr starts the journal",
			meta:   Meta{SeqNr: 9, Offset: 10},
			exists: true,
			ops: []Op{
				{Kind: action.KindPurge, Offset: 11},
				{Kind: action.KindAppend, Offset: 13, Parts: []AppendPart{part(12, 1, 1, "p"), part(13, 1, 1, "q")}},
			},
			events: "1p", seqNr: 1, delTo: 0, conflicts: "13:1..1>1", dirty: true, metaOffsetEnd: 12,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := applyKey(0, tc.ops, tc.meta, tc.exists, time.Unix(0, 0))
			var evs, cs string
			prev := int64(0)
			for _, e := range r.events {
				if e.SeqNr <= prev {
					t.Errorf("events not increasing: %d after %d", e.SeqNr, prev)
				}
				prev = e.SeqNr
				evs += fmt.Sprintf(" %d%s", e.SeqNr, e.Payload)
			}
			for _, c := range r.conflicts {
				cs += fmt.Sprintf(" %d:%d..%d>%d", c.Offset, c.From, c.To, c.SeqNr)
			}
			if evs != prefixed(tc.events) || cs != prefixed(tc.conflicts) {
				t.Errorf("events%s conflicts%s; want events %s conflicts %s", evs, cs, tc.events, tc.conflicts)
			}
			if r.meta.SeqNr != tc.seqNr || r.meta.DeleteTo != tc.delTo || r.dirty != tc.dirty || r.meta.Offset != tc.metaOffsetEnd {
				t.Errorf("meta seqNr %d deleteTo %d offset %d dirty %v; want %d %d %d %v", r.meta.SeqNr, r.meta.DeleteTo, r.meta.Offset, r.dirty, tc.seqNr, tc.delTo, tc.metaOffsetEnd, tc.dirty)
			}
		})
	}
}

func prefixed(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}

// Head.Apply refuses the same Appends ApplyTx does: readers and the
// replicator agree on every conflict.
func TestHeadApplyConflicts(t *testing.T) {
	h := NewHead(Meta{}, false)
	steps := []struct {
		a      action.Header
		ok     bool
		seqNr  int64
		exists bool
	}{
		{action.Header{Kind: action.KindAppend, From: 3, To: 5}, true, 5, true},
		{action.Header{Kind: action.KindAppend, From: 5, To: 6}, false, 5, true},
		{action.Header{Kind: action.KindAppend, From: 1, To: 1}, false, 5, true},
		{action.Header{Kind: action.KindDelete, To: 9}, true, 5, true},
		{action.Header{Kind: action.KindAppend, From: 6, To: 6}, true, 6, true},
		{action.Header{Kind: action.KindPurge}, true, 0, false},
		{action.Header{Kind: action.KindAppend, From: 1, To: 2}, true, 2, true},
	}
	for i, s := range steps {
		if ok := h.Apply(s.a, int64(i)); ok != s.ok || h.SeqNr != s.seqNr || h.Exists != s.exists {
			t.Fatalf("step %d %+v: ok %v seqNr %d exists %v; want %v %d %v", i, s.a, ok, h.SeqNr, h.Exists, s.ok, s.seqNr, s.exists)
		}
	}
}
