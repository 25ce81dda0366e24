// Package record defines the unit of data that flows through streamd: a
// Kafka-shaped record (key, value, headers, timestamp, source position) that
// knows nothing about Kafka clients, Wasm or plugins.
//
// It also implements the JSON-lines format that the file source and sink,
// and the plugin run/test commands, read and write:
//
//	{"key":"k","value":"v","headers":{"h":"x"},"partition":0,"offset":7,"timestamp":"2026-01-02T03:04:05Z"}
//
// key and value are UTF-8 strings; bytes that are not valid UTF-8 are written
// as key_b64/value_b64 (standard base64) instead. A null key or value is
// written by omitting the field.
package record
