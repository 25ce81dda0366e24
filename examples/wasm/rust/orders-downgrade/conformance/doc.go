// Package conformance tests the Rust orders-downgrade Wasm plugin
// (examples/wasm/rust/orders-downgrade) from Go: it builds the plugin with
// the system rustc and its wasm32-wasi standard library, runs the
// conformance fixture through `streamd plugin test`, and fuzzes the plugin against the Go reference
// downgrade (examples/wasm/go/orders-downgrade/downgrade), byte for byte.
package conformance
