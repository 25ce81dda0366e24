// Package native loads native plugins: executables that streamd runs as child
// processes and talks to over gRPC with hashicorp/go-plugin, speaking the
// streamd native plugin protocol (proto/streamd/plugin/v1, same semantics as
// the Wasm host ABI in docs/abi.md). Plugin authors use sdk/go/native, or any
// language with gRPC (docs/native-plugins.md).
//
// Open starts the binary, negotiates the protocol version, checks the
// manifest and passes the config. The returned plugin supervises its process:
// if the process dies, it is restarted with capped exponential backoff and the
// batch in flight is retried on the new process; too many crashes within a
// window put the plugin into a failed state, reported by its Health method
// and returned by every later call.
package native
