// Package action is the wire codec of journal actions, compatible with
// kafka-journal (github.com/evolution-gaming/kafka-journal):
//
//   - the journal.action header, UTF-8 JSON naming one action
//     ({"append":{...}}, {"delete":{...}}, {"purge":{...}}, {"mark":{...}});
//   - the Append payload in its two formats: "json" (a JSON document with
//     the events) and "binary" (a big-endian framing used when any event has
//     a binary payload).
//
// Decoding keeps what it needs to re-encode the same bytes: JSON values
// (event payloads, metadata) are kept raw, tags keep their order, and the
// expireAfter duration keeps its text. Output JSON is compact, with fields
// in the original's order, and strings escaped as jsoniter-scala does
// (only '"', '\' and control characters).
package action
