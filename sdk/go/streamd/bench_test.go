package streamd

import (
	"strconv"
	"testing"
)

// benchBatch is a request batch of n records shaped like the runtime's
// BenchmarkPlugins batch: a 16-byte key, a ~200-byte JSON value and one
// header.
func benchBatch(n int) []byte {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Key:       []byte("key-" + pad(i, 12)),
			Value:     []byte(`{"order_id":"o-` + pad(i, 8) + `","customer":{"id":"c-` + pad(i%1000, 6) + `","name":"Ann Example"},"amount_cents":` + strconv.Itoa(i*7) + `,"currency":"EUR","tags":["a","b","c"],"note":"0123456789abcdef0123456789"}`),
			Headers:   []Header{{Key: "trace-id", Value: []byte("0123456789abcdef")}},
			Timestamp: 1767225600000 + int64(i),
		}
	}
	return request(OpTransform, recs...)
}

func pad(n, width int) string {
	s := strconv.Itoa(n)
	for len(s) < width {
		s = "0" + s
	}
	return s
}

// BenchmarkProcessIdentity is the SDK's own cost per record: a batch of 256
// decoded, handed to a transform that returns its record with One, and
// the reply encoded. Natively, so it shows where the SDK's instructions
// go (a Go Wasm guest runs the same code at ~11x the instructions).
func BenchmarkProcessIdentity(b *testing.B) {
	req := benchBatch(256)
	p := &plugin{transform: func(r *Record) ([]Record, error) { return One(*r), nil }}
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		if status, reply := p.process(req); status != StatusOK {
			b.Fatalf("status %d: %s", status, reply)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/record")
}
