package store

import (
	"testing"
	"time"

	"github.com/streamd/streamd/journal/internal/action"
)

// A writer that appends a seqNr again (lower than the journal's last)
// overwrites it: of the events an Append writes, the last one of each
// seqNr is kept, in seqNr order, as applying each action alone would.
func TestApplyKeyRewrittenSeqNr(t *testing.T) {
	ev := func(s int64, p string, off int64) Event {
		return Event{SeqNr: s, Kind: action.PayloadText, Payload: []byte(p), Offset: off}
	}
	ops := []Op{
		{Kind: action.KindAppend, Offset: 2, From: 1, To: 3, Events: []Event{ev(1, "a", 1), ev(2, "a", 1), ev(3, "a", 1), ev(2, "bb", 2), ev(3, "bb", 2)}},
		{Kind: action.KindDelete, Offset: 3, DeleteTo: 1},
		{Kind: action.KindAppend, Offset: 4, From: 3, To: 4, Events: []Event{ev(3, "ccc", 4), ev(4, "ccc", 4)}},
	}
	r := applyKey(0, ops, Meta{}, false, time.Unix(0, 0))
	var got []string
	for _, e := range r.survivors() {
		got = append(got, string(rune('0'+e.SeqNr))+string(e.Payload))
	}
	want := []string{"2bb", "3ccc", "4ccc"}
	if len(got) != len(want) {
		t.Fatalf("survivors %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("survivors %v, want %v", got, want)
		}
	}
	if r.meta.SeqNr != 4 || r.meta.DeleteTo != 1 {
		t.Fatalf("meta seqNr %d deleteTo %d, want 4 1", r.meta.SeqNr, r.meta.DeleteTo)
	}
}
