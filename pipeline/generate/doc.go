// Package generate is the "generate" source of streamd's config: synthetic
// order records for demos, tests and benchmarks.
package generate
