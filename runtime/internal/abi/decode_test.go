package abi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/sdk/go/streamd"
	wire "github.com/streamd/streamd/sdk/go/streamd/abi"
)

// The Go SDK's pure code answers the requests of these tests: a copying
// identity that keeps, rejects, drops or doubles records by their value.
func init() {
	streamd.Transform(streamd.Manifest{Name: "copy", Version: "1"}, func(r *streamd.Record) ([]streamd.Record, error) {
		switch string(r.Value) {
		case "keep":
			return nil, streamd.KeepRecord
		case "reject":
			return nil, errors.New("no thanks")
		case "drop":
			return nil, nil
		case "twice":
			return []streamd.Record{*r, *r}, nil
		}
		return []streamd.Record{*r}, nil
	})
}

// replies are well-formed result batches and the input records they
// answer: every kind of entry, null and empty fields, records without
// headers and with several, and the orders downgrade's shape.
func replies(tb testing.TB) []struct {
	in    []record.Record
	reply []byte
} {
	tb.Helper()
	ts := time.UnixMilli(1767225600123).UTC()
	batches := [][]record.Record{
		{
			{Partition: -1, Offset: -1},
			{Key: []byte{}, Value: []byte{}, Timestamp: time.UnixMilli(0).UTC(), Topic: "t"},
			{Key: []byte{0, 0xff}, Value: []byte("keep"), Timestamp: time.UnixMilli(-5).UTC(), Partition: 7, Offset: 1 << 40,
				Headers: []record.Header{{Key: "a"}, {Key: "", Value: []byte{}}, {Key: "a", Value: []byte("again")}}},
			{Key: []byte("k"), Value: []byte("reject")},
			{Key: []byte("k"), Value: []byte("drop")},
			{Key: []byte("k"), Value: []byte("twice"), Headers: []record.Header{{Key: "ü", Value: []byte("✓")}}, Timestamp: ts},
		},
		{
			{Key: []byte("key-000000000001"), Value: []byte(`{"order_id":"o-00000001","amount":"1.00"}`), Timestamp: ts, Topic: "orders", Offset: 9,
				Headers: []record.Header{{Key: "trace-id", Value: []byte("0123456789abcdef")}, {Key: "fluid-schema-version", Value: []byte("1")}}},
			{Key: nil, Value: []byte("twice"), Topic: "orders", Offset: 10, Headers: []record.Header{{Key: "", Value: nil}}},
		},
		{{Value: []byte("keep")}, {Value: []byte("keep")}, {Value: []byte("reject")}},
		// One record each with the same headers: decoded in one pass.
		{
			{Key: []byte("k1"), Value: []byte(`{"a":1}`), Timestamp: ts, Topic: "orders", Partition: 3, Offset: 7,
				Headers: []record.Header{{Key: "trace-id", Value: []byte("0123456789abcdef")}, {Key: "v", Value: []byte("1")}}},
			{Key: []byte{}, Value: nil, Topic: "orders", Partition: 3, Offset: 8,
				Headers: []record.Header{{Key: "", Value: nil}, {Key: "v", Value: []byte{}}}},
			{Key: nil, Value: []byte("x"), Timestamp: time.UnixMilli(-1767225600123).UTC(), Topic: "orders", Partition: 3, Offset: 9,
				Headers: []record.Header{{Key: "trace-id", Value: []byte("x")}, {Key: "v", Value: []byte("1")}}},
		},
		// ... until one with another number of headers, or none.
		{
			{Key: []byte("k1"), Value: []byte("a"), Headers: []record.Header{{Key: "h", Value: []byte("1")}}},
			{Key: []byte("k2"), Value: []byte("b"), Headers: []record.Header{{Key: "h", Value: []byte("2")}}},
			{Key: []byte("k3"), Value: []byte("c"), Headers: []record.Header{{Key: "h", Value: []byte("3")}, {Key: "i"}}},
			{Key: []byte("k4"), Value: []byte("d")},
			{Key: []byte("k5"), Value: []byte("e"), Headers: []record.Header{{Key: "h", Value: []byte("5")}}},
		},
		{{Key: []byte("k1"), Value: []byte("a")}, {Key: []byte("k2"), Value: []byte("b")}},
		{{Key: []byte("k1"), Value: []byte("a")}, {Key: []byte("k2"), Value: []byte("b"), Headers: []record.Header{{Key: "h"}}}},
		// ... until one of no records: its Records is empty, not nil.
		// (The value is long enough for the reply to hold three records:
		// fillUniform does not start on a batch too short for all to be.)
		{{Key: []byte("k1"), Value: bytes.Repeat([]byte("a"), 100)}, {Value: []byte("drop")}, {Value: []byte("keep")}},
	}
	var out []struct {
		in    []record.Record
		reply []byte
	}
	for _, in := range batches {
		size, err := RequestSize(in)
		if err != nil {
			tb.Fatal(err)
		}
		req := make([]byte, size)
		if _, ok := EncodeRequest(req, wire.OpTransform, in); !ok {
			tb.Fatal("no room")
		}
		status, reply := streamd.Process(req)
		if status != streamd.StatusOK {
			tb.Fatalf("status %d: %s", status, reply)
		}
		out = append(out, struct {
			in    []record.Record
			reply []byte
		}{in, bytes.Clone(reply)})
	}
	// Hand-made: a reject with an empty reason, an output of no records,
	// KEEP written as OK with out_count 0xFFFFFFFF among them.
	u32 := binary.LittleEndian.AppendUint32
	b := u32(nil, 3)
	b = u32(u32(b, wire.EntryReject), 0)
	b = u32(u32(b, wire.EntryOK), 0)
	b = u32(u32(b, wire.EntryOK), wire.Keep)
	out = append(out, struct {
		in    []record.Record
		reply []byte
	}{make([]record.Record, 3), b})
	return out
}

// recsFor is decodeResult's array of n records for fill: nil for none.
func recsFor(n int) []record.Record {
	if n == 0 {
		return nil
	}
	return make([]record.Record, n)
}

// scanBatch is decodeResult's check of the count, then scanf over every
// entry.
func scanBatch(scanf func([]byte, int, int) (int, int, bool), buf []byte, n int) (nrec, nhdr int, ok bool) {
	if len(buf) < 4 || uint64(binary.LittleEndian.Uint32(buf)) != uint64(n) {
		return 0, 0, false
	}
	return scanf(buf, 4, n)
}

// agree decodes reply for in with decodeResult and decodeResultChecked, both
// owning the same buffer (neither writes it), and fails unless they give
// the same answer: the same error, or results equal field by field, the
// same arrays' lengths and capacities, byte fields at the same addresses
// (but for empty ones of capacity 0),
// and KEEP answers aliasing the same input records.
func agree(t *testing.T, reply []byte, in []record.Record) (accepted bool) {
	t.Helper()
	calls := 0
	reject := func(reason string) error { calls++; return errors.New(reason) }
	_, _, ok := scanBatch(scan, reply, len(in))
	_, _, okPortable := scanBatch(scanPortable, reply, len(in))
	want, wantKept, wantErr := decodeResultChecked(reply, in, reject, true)
	wantCalls := calls
	calls = 0
	got, gotKept, gotErr := decodeResult(reply, in, reject, true)
	if ok != (wantErr == nil) || okPortable != ok {
		t.Fatalf("scan says %v, scanPortable %v, the checked decoder %v; reply %x for %d records", ok, okPortable, wantErr, reply, len(in))
	}
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || gotKept != wantKept || calls != wantCalls {
		t.Fatalf("error %v, kept %v, %d rejections; want %v, %v, %d; reply %x", gotErr, gotKept, calls, wantErr, wantKept, wantCalls, reply)
	}
	if wantErr != nil {
		return false
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("results\n got  %+v\n want %+v\n reply %x", got, want, reply)
	}
	samePlace := func(what string, x, y []byte) {
		// (Where an empty slice of capacity 0 points is not defined: Go
		// leaves it at the start of what it was cut from.)
		if cap(x) != cap(y) || cap(x) > 0 && unsafe.SliceData(x) != unsafe.SliceData(y) {
			t.Fatalf("%s at %p cap %d, want %p cap %d; reply %x", what, unsafe.SliceData(x), cap(x), unsafe.SliceData(y), cap(y), reply)
		}
	}
	for i := range got {
		g, w := got[i].Records, want[i].Records
		if cap(g) != cap(w) || (len(w) > 0 && (&w[0] == &in[i]) != (&g[0] == &in[i])) {
			t.Fatalf("result %d: cap %d, want %d, or KEEP aliasing differs", i, cap(g), cap(w))
		}
		for j := range w {
			samePlace("key", g[j].Key, w[j].Key)
			samePlace("value", g[j].Value, w[j].Value)
			if cap(g[j].Headers) != cap(w[j].Headers) {
				t.Fatalf("result %d record %d: headers cap %d, want %d", i, j, cap(g[j].Headers), cap(w[j].Headers))
			}
			for k := range w[j].Headers {
				if unsafe.StringData(g[j].Headers[k].Key) != unsafe.StringData(w[j].Headers[k].Key) {
					t.Fatalf("result %d record %d header %d: name elsewhere", i, j, k)
				}
				samePlace("header value", g[j].Headers[k].Value, w[j].Headers[k].Value)
			}
		}
	}
	// The safe Go scan and fill (the only ones on machines other than amd64
	// and arm64) decode the same.
	nrec, nhdr, _ := scanBatch(scanPortable, reply, len(in))
	portable := make([]plugins.Result, len(in))
	fillPortable(reply, 4, in, portable, errors.New, recsFor(nrec), nhdr)
	if !reflect.DeepEqual(portable, want) {
		t.Fatalf("fillPortable\n got  %+v\n want %+v\n reply %x", portable, want, reply)
	}
	// Not owned: the output records are in a copy, equal to the owned ones.
	copied, _, err := decodeResult(bytes.Clone(reply), in, errors.New, false)
	if err != nil || !reflect.DeepEqual(copied, want) {
		t.Fatalf("not owned: %v\n got  %+v\n want %+v", err, copied, want)
	}
	return true
}

// TestDecodeImplementations checks decodeResult, the scan and fill that
// trusts the fields of a record once its size and lengths are checked (and
// scanPortable and fillPortable, its safe Go form), against
// decodeResultChecked on well-formed replies and on every
// truncation, every extension by one byte and every byte set to each of
// 0x00, 0x01, 0x07, 0x14, 0x7f, 0x80, 0xfe and 0xff, for the right number of
// input records and one fewer or more: they must accept the same replies,
// fail with the same error and decode the same results. The scan of every
// changed reply runs on a copy at the end of mapped memory too, so that a
// word loaded past the end (a check off by a few bytes) crashes the test.
func TestDecodeImplementations(t *testing.T) {
	accepted, rejected := 0, 0
	count := func(ok bool) {
		if ok {
			accepted++
		} else {
			rejected++
		}
	}
	for _, tt := range replies(t) {
		for _, in := range [][]record.Record{tt.in, tt.in[:len(tt.in)-1], append(tt.in[:len(tt.in):len(tt.in)], record.Record{})} {
			count(agree(t, tt.reply, in))
			for n := range len(tt.reply) {
				count(agree(t, tt.reply[:n], in))
				// Read nothing past the end: at the end of the mapped
				// memory (Linux), a byte too far faults.
				atPageEnd(t, tt.reply[:n], func(b []byte) { _, _, _ = decodeResult(b, in, errors.New, true) })
			}
			for _, c := range []byte{0, 1, 0x80} {
				count(agree(t, append(bytes.Clone(tt.reply), c), in))
			}
			for pos := range tt.reply {
				for _, c := range []byte{0x00, 0x01, 0x07, 0x14, 0x7f, 0x80, 0xfe, 0xff} {
					if tt.reply[pos] == c {
						continue
					}
					b := bytes.Clone(tt.reply)
					b[pos] = c
					count(agree(t, b, in))
					atPageEnd(t, b, func(b []byte) { _, _, _ = decodeResult(b, in, errors.New, true) })
				}
			}
		}
	}
	t.Logf("%d replies accepted, %d rejected", accepted, rejected)
	if accepted < 100 || rejected < 1000 {
		t.Fatalf("%d replies accepted and %d rejected: the test lost its cases", accepted, rejected)
	}
}

// FuzzDecodeImplementations is TestDecodeImplementations' comparison on
// arbitrary replies.
func FuzzDecodeImplementations(f *testing.F) {
	for _, tt := range replies(f) {
		f.Add(tt.reply, uint8(len(tt.in)))
	}
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, uint8(1))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 32, 0, 0, 0}, uint8(1))
	f.Fuzz(func(t *testing.T, reply []byte, n uint8) {
		in := make([]record.Record, n%16)
		for i := range in {
			in[i].Offset, in[i].Topic = int64(i), "t"
		}
		agree(t, reply, in)
	})
}

// decodePortable is decodeResult with scanPortable and fillPortable.
func decodePortable(buf []byte, in []record.Record, reject func(string) error, _ bool) ([]plugins.Result, bool, error) {
	nrec, nhdr, ok := scanBatch(scanPortable, buf, len(in))
	if !ok {
		return nil, false, errors.New("malformed")
	}
	results := make([]plugins.Result, len(in))
	fillPortable(buf, 4, in, results, reject, recsFor(nrec), nhdr)
	return results, nrec > 0, nil
}

// BenchmarkDecodeImplementations decodes the Go SDK's copy of 256 orders
// shaped like the downgrade's output (two headers) with decodeResult and
// with decodeResultChecked, side by side; portable is decodeResult's safe
// Go form.
func BenchmarkDecodeImplementations(b *testing.B) {
	in := make([]record.Record, 256)
	for i := range in {
		in[i] = record.Record{
			Key:   []byte(fmt.Sprintf("key-%012d", i)),
			Value: []byte(fmt.Sprintf(`{"order_id":"o-%08d","customer_id":"c-%06d","amount":"%d.%02d","currency":"EUR","note":"0123456789abcdef0123456789"}`, i, i%1000, i*7/100, i*7%100)),
			Headers: []record.Header{{Key: "trace-id", Value: []byte("0123456789abcdef")},
				{Key: "fluid-schema-version", Value: []byte("1")}},
			Timestamp: time.UnixMilli(1767225600000 + int64(i)), Topic: "orders", Offset: int64(i),
		}
	}
	size, _ := RequestSize(in)
	req := make([]byte, size)
	EncodeRequest(req, wire.OpTransform, in)
	_, reply := streamd.Process(req)
	reply = bytes.Clone(reply)
	for _, impl := range []struct {
		name string
		f    func([]byte, []record.Record, func(string) error, bool) ([]plugins.Result, bool, error)
	}{{"checked", decodeResultChecked}, {"portable", decodePortable}, {"scan-fill", decodeResult}} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := impl.f(reply, in, errors.New, true); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/record")
		})
	}
}
