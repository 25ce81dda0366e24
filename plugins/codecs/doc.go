// Package codecs implements the built-in payload codecs of streamd: gzip,
// snappy, lz4 and zstd, in Go, as [plugins.Codec] values that need no plugin
// process or Wasm module.
//
// A codec compresses (Encode) or decompresses (Decode) each payload of a
// batch on its own: payloads are record values (or keys), not Kafka record
// batches. Kafka's own batch compression (the producer's compression.type) is
// a different layer that the Kafka client handles; a record can be compressed
// by both.
//
// # Wire formats
//
// Every codec writes a self-contained, standard format that other tools read:
//
//   - gzip: one RFC 1952 gzip member (as written by gzip(1)). Decode also
//     accepts several concatenated members, as gzip(1) does.
//   - snappy: the plain snappy block format (a uvarint of the decoded length,
//     then snappy elements), as written by snappy.Encode in Go, C++ and Java
//     (Snappy.compress). It is neither the snappy framing (stream) format nor
//     the xerial snappy-java framing that Kafka uses for snappy-compressed
//     record batches; that framing belongs to batch compression only. Decode
//     is strict: input with S2 extensions is rejected.
//   - lz4: one LZ4 frame (the format of lz4(1) and LZ4F_compressFrame, magic
//     0x184D2204) with 64 KiB blocks and a content checksum.
//   - zstd: one Zstandard frame (RFC 8878) with a content checksum.
//
// # Levels
//
// Level 0 means the codec's default. Otherwise:
//
//	gzip    1..9   (default 6)
//	snappy  1..3   (1 fast, 2 better, 3 best; default 2) - all emit plain snappy
//	lz4     1..9   (LZ4 HC levels; default: fast, non-HC)
//	zstd    1..22  (zstd levels, mapped onto the four levels of
//	               klauspost/compress: 1-2 fastest, 3-5 default, 6-9 better,
//	               10-22 best; default 3)
//
// # Payload rules
//
// A nil payload (a Kafka null value, such as a tombstone) passes through both
// Encode and Decode as nil. An empty, non-nil payload is encoded normally; an
// empty payload given to Decode is an error for every codec.
//
// A payload that does not decode gets its own error in [plugins.Payload].Err,
// naming the codec and the payload's index in the batch; the other payloads
// of the batch are unaffected. Decoding stops with [ErrTooLarge] once a
// payload's decoded size would pass the limit set by [WithMaxDecodedSize]
// (64 MiB by default), so a small compressed payload cannot exhaust memory.
// Only a cancelled context fails a whole batch.
//
// Codecs are safe for concurrent use. They reuse compressors and
// decompressors across payloads and batches, and each output payload is a
// fresh slice that the caller owns.
package codecs
