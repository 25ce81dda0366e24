package codecs_test

import (
	"context"
	"fmt"
	"testing"

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
