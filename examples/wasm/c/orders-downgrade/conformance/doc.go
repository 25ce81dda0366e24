// Package conformance tests the C orders-downgrade Wasm plugin
// (examples/wasm/c/orders-downgrade) from Go: it builds the plugin with the
// system clang and wasi-libc, runs the conformance fixture through
// `streamd plugin test`, and fuzzes the plugin against the Go reference
// downgrade (examples/wasm/go/orders-downgrade/downgrade), byte for byte.
package conformance
