package journal

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/streamd/streamd/journal/internal/action"
)

// The own log's intervals against a set of offsets, added out of order
// and with gaps.
func TestOwnLogIntervals(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var l ownLog
		have := map[int64]bool{}
		for range 300 {
			off := int64(r.IntN(400))
			if have[off] {
				continue // a produced offset comes once
			}
			l.start("t")
			l.done("t", true, 0, off, "k", action.Header{Kind: action.KindAppend, From: off + 1, To: off + 1})
			have[off] = true
		}
		p := l.parts[partKey{"t", 0}]
		for i := 1; i < len(p.ivs); i++ {
			if p.ivs[i].lo <= p.ivs[i-1].hi+1 {
				t.Fatalf("intervals not merged or not sorted: %v", p.ivs)
			}
		}
		for range 100 {
			from := int64(r.IntN(400))
			to := from + int64(r.IntN(50))
			want := int64(0)
			for o := from; o <= to; o++ {
				if !have[o] {
					want++
				}
			}
			if got := p.missing(from, to); got != want {
				t.Fatalf("missing(%d, %d) = %d, want %d (intervals %v)", from, to, got, want, p.ivs)
			}
			acts, ok := l.actions(context.Background(), "t", 0, "k", from, to)
			if ok != (want == 0) {
				t.Fatalf("actions(%d, %d) ok %v with %d missing", from, to, ok, want)
			}
			if ok && int64(len(acts)) != to-from+1 {
				t.Fatalf("actions(%d, %d): %d, want %d", from, to, len(acts), to-from+1)
			}
		}
	}
}
