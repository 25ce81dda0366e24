// Package wasm loads WebAssembly plugins (host ABI v1, docs/abi.md) as
// streamd plugins: Open returns a plugins.Plugin that is also a
// plugins.Transformer, plugins.Codec or plugins.Sink, by the kind its
// manifest declares.
//
// It also runs, unchanged, the Wasm transforms written for two other hosts
// (docs/plugins.md, "Bringing a Redpanda transform or Fluvio SmartModule"):
// Redpanda data transforms (built with Redpanda's SDKs) and Fluvio
// SmartModules (filter, map, filter_map, array_map), which the runtime
// recognizes by their imports and exports. Such a module is a transform
// named after its file, with the same limits, grants, verdicts and hot
// reload as a streamd plugin; ABI names which it is.
//
// A batch that fails as a whole (a trap, a timeout, running out of memory,
// ERR_BATCH, a malformed reply) returns a non-nil error and leaves the
// plugin usable: the failed instance is replaced. Isolating a poison record
// by retrying one record at a time is the caller's job.
package wasm
