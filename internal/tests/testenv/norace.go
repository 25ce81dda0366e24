//go:build !race

package testenv

// Race is whether the race detector is on. It slows calls several times
// and keeps shadow memory for everything the heap ever held, so bounds
// on time and memory are checked in the passes without it.
const Race = false
