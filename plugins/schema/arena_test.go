package schema

import (
	"bytes"
	"testing"
)

// TestArena: outputs cut from an arena never overlap, whatever their sizes
// against the estimate (empty, as estimated, far larger: spilled out of
// the arena by append), and the next batch's estimate follows what the
// last one saw.
func TestArena(t *testing.T) {
	var r ratio
	if r.get() != 2048 {
		t.Fatalf("default ratio %d, want 2048 (2x)", r.get())
	}
	for round, sizes := range [][]int{
		{10, 0, 30, 500, 10, 10, 4000, 1, 0, 20},
		{100, 100, 100, 100},
		{1, 1, 1, 70000, 1},
	} {
		in := make([]int, len(sizes))
		total := 0
		for i := range sizes {
			in[i] = 50
			total += in[i]
		}
		a := newArena(total, &r)
		var outs [][]byte
		for i, n := range sizes {
			dst := a.start(in[i])
			for k := 0; k < n; k++ {
				dst = append(dst, byte(i+1))
			}
			outs = append(outs, a.keep(dst))
		}
		for i, o := range outs {
			if len(o) != sizes[i] || cap(o) != len(o) || !bytes.Equal(o, bytes.Repeat([]byte{byte(i + 1)}, sizes[i])) {
				t.Fatalf("round %d: output %d was overwritten or has spare capacity: len %d cap %d", round, i, len(o), cap(o))
			}
		}
		r.done(a)
		out := 0
		for _, n := range sizes {
			out += n
		}
		if want := min(max(uint64(out)*1024/uint64(total), 64), 64*1024); r.get() != want {
			t.Fatalf("round %d: ratio %d, want %d", round, r.get(), want)
		}
	}
}
