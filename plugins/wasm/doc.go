// Package wasm loads WebAssembly plugins (host ABI v1, docs/abi.md) as
// streamd plugins: Open returns a plugins.Plugin that is also a
// plugins.Transformer, plugins.Codec or plugins.Sink, by the kind its
// manifest declares.
//
// A batch that fails as a whole (a trap, a timeout, running out of memory,
// ERR_BATCH, a malformed reply) returns a non-nil error and leaves the
// plugin usable: the failed instance is replaced. Isolating a poison record
// by retrying one record at a time is the caller's job.
package wasm
