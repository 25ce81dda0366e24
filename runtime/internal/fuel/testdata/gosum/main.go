// Command gosum is a Go wasip1 module for BenchmarkCheckCost: sum(n) adds
// up the bytes of a 4 KiB buffer n times, a tight loop as Go's Wasm
// backend compiles it (a dispatch loop every jump goes through).
package main

func main() {}

var buf = func() []byte {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}()

//go:wasmexport sum
func sum(n uint32) uint32 { return Sum(buf, n) }

// Sum is also what the benchmark runs natively.
func Sum(b []byte, n uint32) uint32 {
	var t uint32
	for ; n > 0; n-- {
		for _, c := range b {
			t += uint32(c)
		}
	}
	return t
}
