package kafka

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/x/kgox"
	"github.com/streamd/streamd/record"
)

// TestSetKgoRecordLikeKgox: the sink's franz-go record, whose headers are
// the record's own (kgoHeaders), equals the one kgox.SetKgoRecord builds
// with copied headers, for no headers (nil and empty), one and several
// headers with empty and null keys and values, and every other field; and
// its headers are the record's, not a copy.
func TestSetKgoRecordLikeKgox(t *testing.T) {
	ts := time.UnixMilli(1700000000123).UTC()
	hdrs := [][]record.Header{
		nil,
		{},
		{{Key: "fluid-schema-version", Value: []byte("1")}},
		{{Key: "", Value: nil}},
		{{Key: "a", Value: []byte{}}, {Key: "", Value: []byte("v")}, {Key: "a", Value: []byte("x")}},
		make([]record.Header, 3, 8)[1:2], // a sub-slice with room after it
	}
	for _, key := range [][]byte{nil, {}, []byte("k")} {
		for _, value := range [][]byte{nil, {}, []byte(`{"v":1}`)} {
			for hi, h := range hdrs {
				r := record.Record{Key: key, Value: value, Headers: h, Timestamp: ts, Topic: "in", Partition: 3, Offset: 77}
				var got, want kgo.Record
				setKgoRecord(&got, &r, "out")
				var slab []kgo.RecordHeader
				kgox.SetKgoRecord(&want, &r, "out", &slab)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("key %q value %q headers %d: got %+v, want %+v", key, value, hi, got, want)
				}
				if len(h) > 0 {
					if len(got.Headers) != len(h) || cap(got.Headers) != len(h) ||
						unsafe.Pointer(&got.Headers[0]) != unsafe.Pointer(&h[0]) {
						t.Fatalf("headers %d: not the record's own (len %d cap %d)", hi, len(got.Headers), cap(got.Headers))
					}
					for i := range h {
						if got.Headers[i].Key != h[i].Key || unsafe.SliceData(got.Headers[i].Value) != unsafe.SliceData(h[i].Value) || len(got.Headers[i].Value) != len(h[i].Value) {
							t.Fatalf("headers %d: header %d is %+v, want %+v", hi, i, got.Headers[i], h[i])
						}
					}
				}
			}
		}
	}
}

// TestCheckRecordSizeIsTheSinksLimit: CheckRecordSize refuses exactly the
// records the sink's producer refuses (overLimit), with the sink's words.
func TestCheckRecordSizeIsTheSinksLimit(t *testing.T) {
	s := &Sink{maxBytes: 4096}
	for n := 3900; n < 4100; n++ {
		r := record.Record{Key: []byte("k"), Value: make([]byte, n), Headers: []record.Header{{Key: "h", Value: []byte("v")}}}
		kr := &kgo.Record{Key: r.Key, Value: r.Value, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
		err := CheckRecordSize(&r, 4096)
		if (err != nil) != s.overLimit(kr) {
			t.Fatalf("value of %d bytes: CheckRecordSize %v, the sink's producer refuses it: %v", n, err, s.overLimit(kr))
		}
		if err != nil && !strings.HasPrefix(s.verdict(kr, kerr.MessageTooLarge).Error(), err.Error()+": ") {
			t.Fatalf("CheckRecordSize %q; the sink says %q", err, s.verdict(kr, kerr.MessageTooLarge))
		}
	}
}
