package abi

import (
	"bytes"
	"testing"
	"time"

	"github.com/streamd/streamd/record"
	wire "github.com/streamd/streamd/sdk/go/streamd/abi"
)

// FuzzEncodeImplementations checks encode (unsafe stores on amd64 and
// arm64) against encodePortable byte for byte, for buffers too short, exact
// and roomy. Run it with -race to have checkptr check the unsafe code.
func FuzzEncodeImplementations(f *testing.F) {
	f.Add([]byte("key\x00value\x00trace-id\x000123456789abcdef\x00\x00!"), uint8(5), int64(1767225600123), 3)
	f.Add([]byte("12345678\x00123456789abcdefg\x001234567\x00123456789abcdef\x00x"), uint8(7), int64(-1), 0)
	f.Fuzz(func(t *testing.T, data []byte, nrec uint8, ms int64, slack int) {
		parts := bytes.Split(data, []byte{0})
		next := func() []byte {
			if len(parts) == 0 {
				return nil
			}
			p := parts[0]
			parts = parts[1:]
			if len(p) == 1 && p[0] == '!' {
				return nil // null
			}
			return p
		}
		recs := make([]record.Record, nrec%16)
		for i := range recs {
			r := &recs[i]
			r.Key, r.Value, r.Partition, r.Offset = next(), next(), int32(i-1), ms-int64(i)
			if i%3 != 0 {
				r.Timestamp = time.UnixMilli(ms % 1e14).UTC()
			}
			for range (i + int(nrec)) % 4 {
				r.Headers = append(r.Headers, record.Header{Key: string(next()), Value: next()})
			}
		}
		size, err := RequestSize(recs)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{size, size - 1, size - 1 - slack%64, size + slack%64, 0, 7, 8} {
			if n < 0 {
				continue
			}
			a, b := make([]byte, n, n+8), make([]byte, n, n+8)
			na, oka := encode(a, wire.OpTransform, recs)
			nb, okb := encodePortable(b, wire.OpTransform, recs)
			if na != nb || oka != okb || !bytes.Equal(a[:n+8], b[:n+8]) {
				t.Fatalf("into %d bytes: encode %d, %v\n%x\nencodePortable %d, %v\n%x", n, na, oka, a[:n+8], nb, okb, b[:n+8])
			}
			if oka != (n >= size) || oka && na != size {
				t.Fatalf("into %d bytes for a %d-byte batch: %d, %v", n, size, na, oka)
			}
		}
	})
}
