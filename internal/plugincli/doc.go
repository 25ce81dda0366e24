// Package plugincli implements `streamd plugin inspect|run|test`: load one
// plugin (Wasm or native), show its manifest, run it over records read from a
// JSON-lines file (the format of package record), and compare its output with
// an expected file.
//
// Output of run, one JSON line per result, in input order:
//
//   - transform: each output record, its partition and offset set to those of
//     the input record it came from; a rejected record as
//     {"error":"reason","input_offset":N};
//   - codec (--op encode or decode): the input record with its value replaced
//     by the payload, or an error line;
//   - sink: {"written":true,"input_offset":N} per durably written record, or
//     an error line.
//
// A batch that fails as a whole is retried one record at a time, so a poison
// record shows up as an error line of its own.
package plugincli
