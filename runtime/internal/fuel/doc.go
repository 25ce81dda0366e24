// Package fuel rewrites a WebAssembly module so that its code can be
// interrupted cheaply.
//
// wazero's WithCloseOnContextDone makes compiled code leave native code and
// enter Go at every loop back edge to ask whether the module was closed:
// ~40 ns per loop iteration on this project's machine, which made guest
// code 2–10× slower (wazero issue #2466). Instrument instead gives the
// module a mutable i32 global, the fuel, and inserts at the head of every
// loop, and at the entry of every function that could otherwise run
// unbounded code between two checks, a decrement of it: a function on a
// cycle of calls, one that calls an import or calls indirectly, and one
// whose calls reach too much unchecked code (see entryChecks). A function
// that calls nothing, or only a little code that calls nothing, cannot
// recurse: its entries are bounded by its callers' checks, so it goes
// without one (Version 5; Version 4 checked every function that calls,
// which cost the C orders downgrade ~2% of its instructions). When it reaches
// zero the code calls one imported host function, which decides whether to
// stop the call (by panicking, which wazero turns into an error) and
// otherwise returns the next amount of fuel. The host thus regains control
// every Interval function entries or loop iterations, in Go code, where the
// scheduler and the garbage collector can also preempt the goroutine — which
// a plain flag tested inline would not allow.
//
// The rewrite keeps the module's meaning: the new import is appended after
// the existing function imports, so every defined function's index moves up
// by one, and every place that names a function index (calls, ref.func,
// exports, the start function, element segments, the name section) is
// renumbered. DWARF custom sections, whose code offsets would be stale, are
// dropped.
//
// While it rewrites the module anyway, Instrument also merges active data
// segments separated by short runs of zeros (when that provably leaves the
// initial memory the same): Go's linker emits ~23,000 segments for a small
// plugin, and decoding and copying them one by one cost ~20 ms per load.
package fuel
