package abi

import (
	"syscall"
	"testing"
)

// atPageEnd calls f with a copy of b that ends where an inaccessible page
// begins, so that reading even one byte past it faults.
func atPageEnd(tb testing.TB, b []byte, f func([]byte)) {
	tb.Helper()
	page := syscall.Getpagesize()
	n := (len(b)/page + 1) * page
	mem, err := syscall.Mmap(-1, 0, n+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(mem) }()
	if err := syscall.Mprotect(mem[n:], syscall.PROT_NONE); err != nil {
		tb.Fatal(err)
	}
	out := mem[n-len(b) : n : n]
	copy(out, b)
	f(out)
}
