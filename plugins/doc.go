// Package plugins defines the plugin kinds that streamd runs behind one host
// ABI: transforms, codecs and sinks. The kinds speak in record.Record batches
// and know nothing of Kafka, Wasm or processes; loaders (plugins/wasm,
// plugins/native) implement them, and plugins/load picks the loader for a
// plugin reference such as "wasm:./x.wasm" or "native:./bin".
//
// Batches, not records, cross every plugin boundary.
package plugins
