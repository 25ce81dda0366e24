// Package nosdk tests the plugins of docs/plugins.md, "A language without
// an SDK": examples/wasm/zig/upper and examples/wasm/cpp/upper, written
// from docs/abi.md alone. Each is built with its build.sh (as make
// examples does) and must pass `streamd plugin test` over its fixture.
package nosdk
