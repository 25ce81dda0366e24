// Package fuel rewrites a WebAssembly module so that its code can be
// interrupted cheaply, and so that no guest can do unbounded work between
// two interruptions.
//
// wazero's WithCloseOnContextDone makes compiled code leave native code and
// enter Go at every loop back edge to ask whether the module was closed:
// ~40 ns per loop iteration on this project's machine, which made guest
// code 2–10× slower (wazero issue #2466). Rewrite instead gives the module
// a mutable i32 global, the fuel, and inserts checks that subtract from it
// what the code after them costs; when the fuel is spent the code calls one
// imported host function, which decides whether to stop the call (by
// panicking, which wazero turns into an error) and otherwise returns the
// next amount of fuel. The host thus regains control at least every Fuel
// units of work, in Go code, where the scheduler and the garbage collector
// can also preempt the goroutine — which a plain flag tested inline would
// not allow.
//
// A unit is 64 bytes of code or 64 bytes (or table elements) of a bulk
// instruction: tens of nanoseconds at most. The checks (Version 6):
//   - at every loop head, paying for the loop's body up to its next check
//     (nested loops pay their own);
//   - at the entry of every function that could otherwise run unbounded
//     code: one on a cycle of calls, one that calls an import or calls
//     indirectly, and one whose code, with the unchecked functions it
//     calls, is more than 2 KiB (see entryChecks); it pays for the body up
//     to its next check. A function without a check is paid for by its
//     callers, at each call, as the code it may run;
//   - inside long code, every 8 KiB (counting calls as the code they run),
//     and after the end of a block (or at an else) that such a check
//     inside it may have been skipped by a branch to, so that no code runs
//     unpaid;
//   - before every bulk instruction (memory.fill, memory.copy, memory.init,
//     table.fill, table.copy, table.init, table.grow), charging its count
//     of bytes or elements, read from the stack, when it runs.
//
// Between two calls of the host there are thus at most Fuel units of work,
// plus one bulk instruction (at most the memory or table cap) or one
// check's worth of code. Calls of imports are the host's own business: the
// host looks at its deadline in each (see runtime).
//
// Before it rewrites anything, Rewrite checks every index the module names
// (globals, functions, types, tables, locals, element and data segments)
// against what it declares, and refuses a module that names one it does
// not (ErrInvalid, with the function and the instruction's offset): the
// rewrite appends a type, a function and globals after the module's own,
// and such an index would reach them — a module that sets global N, having
// N globals, would refill its own fuel forever. The rest of validation is
// wazero's, of the rewritten module, which is valid exactly when the module
// as given is. Rewrite also caps every table (Options.MaxTableElements), and
// refuses functions whose compile time would be unbounded (ErrTooComplex).
//
// The rewrite keeps the module's meaning: the new import is appended after
// the existing function imports, so every defined function's index moves up
// by one, and every place that names a function index (calls, ref.func,
// exports, the start function, element segments, the name section) is
// renumbered. DWARF custom sections, whose code offsets would be stale, are
// dropped.
//
// While it rewrites the module anyway, Rewrite also merges active data
// segments separated by short runs of zeros (when that provably leaves the
// initial memory the same): Go's linker emits ~23,000 segments for a small
// plugin, and decoding and copying them one by one cost ~20 ms per load.
package fuel
