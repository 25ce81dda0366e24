// Package plugincli implements `streamd plugin new|inspect|run|test`. new
// writes a plugin project (a transform, codec or sink in Go, Rust, C,
// AssemblyScript or WAT, with its build script and a fixture) that builds
// and passes its test in the two commands it prints. The others load one
// plugin (Wasm or native), show its manifest, run it over records read from a
// JSON-lines file (the format of package record), and compare its output with
// an expected file. run and test use a pipeline's limits (call timeout,
// memory cap, batch size, pool) unless flags say otherwise, and print a
// summary line that names them.
//
// Output of run, one JSON line per result, in input order:
//
//   - transform: each output record, its partition and offset set to those of
//     the input record it came from; a failed record as
//     {"error":"reason","kind":K,"input_offset":N};
//   - codec (--op encode or decode): the input record with its value replaced
//     by the payload, or an error line;
//   - sink: {"written":true,"input_offset":N} per durably written record, or
//     an error line.
//
// K says how the record failed: "rejected" (the plugin rejected it),
// "trap" (the call with it crashed), "timeout", "memory" (the memory cap)
// or "failed" (the plugin failed the call otherwise). A batch that fails as
// a whole is run again one record at a time, so each failed record shows up
// as an error line of its own; after MaxIsolationTimeouts records of one
// batch time out alone, the rest of it is reported without running it
// again. Run's output is valid input: result lines are skipped when reading
// records.
package plugincli
