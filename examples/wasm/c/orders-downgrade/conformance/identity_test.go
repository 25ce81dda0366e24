package conformance

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// TestIdentity sends records of every shape through the identity plugin
// (examples/wasm/c/identity) and expects them back unchanged: null and
// empty keys, values and header values, repeated header names, and values
// large enough to make the SDK grow its input and output buffers.
func TestIdentity(t *testing.T) {
	p := openPath(t, identityBuild.get(t))
	want := plugins.Manifest{Name: "identity", Kind: plugins.KindTransform, Version: "1.0.0", ABI: 1}
	if got := p.Manifest(); got != want {
		t.Fatalf("manifest %+v, want %+v", got, want)
	}
	big := bytes.Repeat([]byte("0123456789"), 30_000)
	batches := [][]record.Record{
		{
			{Key: nil, Value: nil},
			{Key: []byte{}, Value: []byte{}, Headers: []record.Header{{Key: "", Value: nil}, {Key: "", Value: []byte{}}}},
			{Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(1_700_000_000_123),
				Headers: []record.Header{{Key: "h", Value: []byte("1")}, {Key: "h", Value: nil}, {Key: "é", Value: []byte{0, 0xff}}}},
		},
		{{Key: big[:70_000], Value: big}},
		make([]record.Record, 1000),
		{{Value: []byte("small again")}},
	}
	for i := range batches[2] {
		batches[2][i] = record.Record{Value: []byte{byte(i)}, Timestamp: time.UnixMilli(int64(i))}
	}
	tr := p.(plugins.Transformer)
	for bi, batch := range batches {
		res, err := tr.Transform(context.Background(), batch)
		if err != nil {
			t.Fatalf("batch %d: %v", bi, err)
		}
		if len(res) != len(batch) {
			t.Fatalf("batch %d: %d results for %d records", bi, len(res), len(batch))
		}
		for i, r := range res {
			in := batch[i]
			if r.Err != nil || len(r.Records) != 1 {
				t.Fatalf("batch %d record %d: %d records, error %v", bi, i, len(r.Records), r.Err)
			}
			out := r.Records[0]
			if !sameBytes(out.Key, in.Key) || !sameBytes(out.Value, in.Value) || out.Timestamp.UnixMilli() != in.Timestamp.UnixMilli() {
				t.Fatalf("batch %d record %d: got key %q value %.40q ts %v, want key %q value %.40q ts %v",
					bi, i, out.Key, out.Value, out.Timestamp, in.Key, in.Value, in.Timestamp)
			}
			if len(out.Headers) != len(in.Headers) {
				t.Fatalf("batch %d record %d: headers %v, want %v", bi, i, out.Headers, in.Headers)
			}
			for h := range in.Headers {
				if out.Headers[h].Key != in.Headers[h].Key || !sameBytes(out.Headers[h].Value, in.Headers[h].Value) {
					t.Fatalf("batch %d record %d: headers %v, want %v", bi, i, out.Headers, in.Headers)
				}
			}
		}
	}
}

// sameBytes tells apart nil (null) and empty.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}
