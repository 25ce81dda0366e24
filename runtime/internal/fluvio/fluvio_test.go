package fluvio

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// TestRecord: a record as fluvio-protocol encodes it (the bytes of its
// own test of Record: value "dog", offset delta 1).
func TestRecord(t *testing.T) {
	b := AppendRecord(nil, &Record{OffsetDelta: 1, Value: []byte("dog")})
	want := []byte{0x12, 0x0, 0x0, 0x2, 0x0, 0x6, 0x64, 0x6f, 0x67, 0x0}
	if !bytes.Equal(b, want) {
		t.Fatalf("% x, want % x", b, want)
	}
	keyed := AppendRecord(nil, &Record{TimestampDelta: -3, OffsetDelta: 2, Key: []byte("k"), Value: []byte{}})
	out := binary.BigEndian.AppendUint32(nil, 1)
	out = append(append(out, keyed...), 0)
	o, err := DecodeOutput(out)
	if err != nil || len(o.Records) != 1 || string(o.Records[0].Key) != "k" || o.Records[0].OffsetDelta != 2 || o.Records[0].TimestampDelta != -3 || o.Err != nil {
		t.Fatalf("%+v %v", o, err)
	}
}

func TestInput(t *testing.T) {
	in := Input{BaseOffset: 10, BaseTimestamp: 20, Params: []Param{{"a", "b"}}, Records: []Record{{Value: []byte("x")}}}
	b := AppendInput(nil, &in)
	rec := AppendRecord(nil, &in.Records[0])
	var want []byte
	want = binary.BigEndian.AppendUint64(want, 10)
	want = binary.BigEndian.AppendUint32(want, uint32(4+len(rec)))
	want = binary.BigEndian.AppendUint32(want, 1)
	want = append(want, rec...)
	want = append(want, 0, 1, 0, 1, 'a', 0, 1, 'b', 0) // params {a: b}, no lookback
	want = append(want, 0, 0, 0, 0)                    // no join record
	want = binary.BigEndian.AppendUint64(want, 20)
	if !bytes.Equal(b, want) {
		t.Fatalf("% x\nwant % x", b, want)
	}
}

func TestOutputError(t *testing.T) {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, 1)
	b = append(binary.BigEndian.AppendUint16(b, 4), "oops"...)
	b = binary.BigEndian.AppendUint64(b, 12)
	b = append(b, 1, 0, 2, 'v')
	o, err := DecodeOutput(b)
	if err != nil || o.Err == nil || o.Err.Hint != "oops" || o.Err.Offset != 12 || Kind(o.Err.Kind) != "map" {
		t.Fatalf("%+v %v", o.Err, err)
	}
	for _, bad := range []struct {
		b   []byte
		msg string
	}{
		{nil, "record count at byte 0: ends too soon"},
		{[]byte{0, 0, 0, 9}, "9 records with 0 bytes left"},
		{[]byte{0, 0, 0, 0, 2}, "option byte 2"},
		{[]byte{0, 0, 0, 0, 0, 0}, "1 bytes after its end"},
		{[]byte{0, 0, 0, 1, 4, 0, 0}, "record 0 offset delta at byte 7: ends too soon"},
	} {
		if _, err := DecodeOutput(bad.b); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("% x: %v, want %q", bad.b, err, bad.msg)
		}
	}
	if h, err := DecodeInitError(append([]byte{0, 2}, "no"...)); err != nil || h != "no" {
		t.Errorf("init error: %q %v", h, err)
	}
}

// FuzzDecode: the decoders of guest bytes never panic.
func FuzzDecode(f *testing.F) {
	out := binary.BigEndian.AppendUint32(nil, 1)
	out = append(AppendRecord(out, &Record{OffsetDelta: 1, Key: []byte("k"), Value: []byte("v")}), 0)
	f.Add(out)
	f.Add([]byte{0, 2, 'n', 'o'})
	f.Fuzz(func(t *testing.T, b []byte) {
		if o, err := DecodeOutput(b); err == nil {
			for _, r := range o.Records {
				_ = AppendRecord(nil, &r)
			}
		}
		_, _ = DecodeInitError(b)
	})
}

// TestAppendInputAllocs: encoding a batch into a buffer with room for it
// allocates nothing (the host encodes every batch a SmartModule runs).
func TestAppendInputAllocs(t *testing.T) {
	in := Input{Params: []Param{{"k", "v"}}}
	for i := range 256 {
		in.Records = append(in.Records, Record{OffsetDelta: int64(i), Key: []byte("key"), Value: bytes.Repeat([]byte("a"), 200)})
	}
	buf := AppendInput(nil, &in)
	if n := testing.AllocsPerRun(10, func() { buf = AppendInput(buf[:0], &in) }); n != 0 {
		t.Fatalf("AppendInput of 256 records: %v allocations, want 0", n)
	}
}

// TestVarintLen: varintLen is the length AppendVarint writes.
func TestVarintLen(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 1 << 20, -1 << 40, 1<<63 - 1, -1 << 63} {
		if got, want := varintLen(v), len(AppendVarint(nil, v)); got != want {
			t.Errorf("varintLen(%d) = %d, want %d", v, got, want)
		}
	}
}
