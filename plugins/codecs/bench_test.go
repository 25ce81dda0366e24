package codecs_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins/codecs"
)

// BenchmarkCodecs encodes and decodes batches of 256 order records of about
// 200 bytes of JSON each, one payload per record. It reports ns/record, MB/s
// of uncompressed bytes, and ratio (encoded/raw bytes).
func BenchmarkCodecs(b *testing.B) {
	ctx := context.Background()
	const batchSize = 256
	batch := make([][]byte, batchSize)
	raw := 0
	for i := range batch {
		batch[i] = orderJSON(i * 7919)
		raw += len(batch[i])
	}
	for _, name := range codecs.Names() {
		c := newCodec(b, name, 0)
		enc, err := c.Encode(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		encoded := make([][]byte, len(enc))
		encBytes := 0
		for i, p := range enc {
			encoded[i] = p.Data
			encBytes += len(p.Data)
		}
		for _, op := range []string{"encode", "decode"} {
			b.Run(fmt.Sprintf("%s/%s", name, op), func(b *testing.B) {
				b.SetBytes(int64(raw))
				b.ReportAllocs()
				for b.Loop() {
					var err error
					if op == "encode" {
						_, err = c.Encode(ctx, batch)
					} else {
						_, err = c.Decode(ctx, encoded)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/record")
				b.ReportMetric(float64(encBytes)/float64(raw), "ratio")
			})
		}
	}
}

// BenchmarkNoReuse is the baseline for BenchmarkCodecs/*/encode: the same
// batch, compressed with a new compressor per payload, as a codec that did
// not reuse them would. Compare ns/record.
func BenchmarkNoReuse(b *testing.B) {
	const batchSize = 256
	batch := make([][]byte, batchSize)
	raw := 0
	for i := range batch {
		batch[i] = orderJSON(i * 7919)
		raw += len(batch[i])
	}
	encoders := map[string]func(p []byte) []byte{
		"gzip": func(p []byte) []byte {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, 6)
			if _, err := zw.Write(p); err != nil {
				panic(err) // into a bytes.Buffer: does not fail
			}
			if err := zw.Close(); err != nil {
				panic(err)
			}
			return buf.Bytes()
		},
		"lz4": func(p []byte) []byte {
			var buf bytes.Buffer
			zw := lz4.NewWriter(&buf)
			if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
				panic(err)
			}
			if _, err := zw.Write(p); err != nil {
				panic(err)
			}
			if err := zw.Close(); err != nil {
				panic(err)
			}
			return buf.Bytes()
		},
		"zstd": func(p []byte) []byte {
			zw, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
			defer testenv.Ignore(zw.Close) // EncodeAll does not use the stream
			return zw.EncodeAll(p, nil)
		},
	}
	for _, name := range []string{"gzip", "lz4", "zstd"} {
		enc := encoders[name]
		b.Run(name+"/encode", func(b *testing.B) {
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range batch {
					if len(enc(p)) == 0 {
						b.Fatal("empty output")
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/record")
		})
	}
}
