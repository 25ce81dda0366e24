package kafka

import (
	"testing"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

func msg(p int32, off int64, epoch uint64) pipeline.Msg {
	return pipeline.Msg{Record: record.Record{Topic: "t", Partition: p, Offset: off}, Token: epoch}
}

func TestFilterLive(t *testing.T) {
	s := &Source{parts: map[tp]*partState{
		{"t", 0}: {epoch: 1},
		{"t", 1}: {epoch: 5}, // revoked and assigned again since epoch 2
	}}
	all := []pipeline.Msg{msg(0, 10, 1), msg(0, 11, 1), msg(1, 3, 2), msg(2, 7, 3), msg(1, 4, 5), msg(0, 12, 1)}
	live := s.FilterLive(all)
	var got []int64
	for _, m := range live {
		got = append(got, m.Record.Offset)
	}
	want := []int64{10, 11, 4, 12} // partition 2 revoked, partition 1's old epoch stale
	if len(got) != len(want) {
		t.Fatalf("live offsets %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("live offsets %v, want %v", got, want)
		}
	}
	if all[2].Record.Offset != 3 {
		t.Fatal("FilterLive modified its input")
	}
	for i := range live {
		if s.Live(&live[i]) != true {
			t.Fatalf("FilterLive and Live disagree on %+v", live[i])
		}
	}
	ok := all[:2]
	if out := s.FilterLive(ok); &out[0] != &ok[0] {
		t.Fatal("an all-live batch was copied")
	}
}

// TestHandOut: records read ahead are handed out at most n at a time, in
// order; those of a partition revoked (or being revoked) since they were
// polled, or assigned again since (a new epoch), are left out, and only
// what is handed out counts as fetched (what a revoke waits for).
func TestHandOut(t *testing.T) {
	s := &Source{parts: map[tp]*partState{
		{"t", 0}: {epoch: 1, fetched: -1},
		{"t", 1}: {epoch: 5, fetched: -1}, // assigned again since epoch 2
		{"t", 3}: {epoch: 4, fetched: -1, revoking: true},
	}}
	s.ahead = []pipeline.Msg{msg(0, 10, 1), msg(0, 11, 1), msg(1, 3, 2), msg(2, 7, 3), msg(3, 1, 4), msg(1, 4, 5), msg(0, 12, 1)}
	var got []int64
	for _, k := range []int{2, 3, 5} {
		for _, m := range s.handOut(k) {
			got = append(got, m.Record.Offset)
		}
		if k == 2 && s.parts[tp{"t", 0}].fetched != 12 {
			t.Fatalf("after handing out offsets 10 and 11 of partition 0, fetched is %d, want 12", s.parts[tp{"t", 0}].fetched)
		}
	}
	want := []int64{10, 11, 4, 12}
	if len(got) != len(want) {
		t.Fatalf("handed out offsets %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("handed out offsets %v, want %v", got, want)
		}
	}
	if s.ahead != nil || s.handOut(10) != nil {
		t.Fatal("records left after handing out all")
	}
	if f := s.parts[tp{"t", 1}].fetched; f != 5 {
		t.Fatalf("partition 1 fetched %d, want 5 (its stale record not counted)", f)
	}
	if f := s.parts[tp{"t", 3}].fetched; f != -1 {
		t.Fatalf("partition 3 (being revoked) fetched %d, want -1", f)
	}
}

// TestHandOutSkipsStaleRun: records ahead of the pipeline that are all
// stale in one handOut's reach do not end the hand-out while live ones
// follow: a nil answer would make FetchUpTo poll again and replace what
// is still ahead (losing it).
func TestHandOutSkipsStaleRun(t *testing.T) {
	s := &Source{parts: map[tp]*partState{
		{"t", 0}: {epoch: 1, fetched: -1},
		{"t", 1}: {epoch: 5, fetched: -1},
	}}
	s.ahead = []pipeline.Msg{msg(1, 3, 2), msg(1, 4, 2), msg(0, 10, 1), msg(0, 11, 1)}
	got := s.handOut(2)
	if len(got) == 0 || got[0].Record.Offset != 10 {
		t.Fatalf("handOut(2) over two stale records then live ones gave %v, want the live record at offset 10 first", got)
	}
	rest := s.handOut(10)
	if len(got)+len(rest) != 2 || s.ahead != nil {
		t.Fatalf("live records handed out: %d then %d; ahead left %d", len(got), len(rest), len(s.ahead))
	}
}
