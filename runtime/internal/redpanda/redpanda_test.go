package redpanda

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/record"
)

func TestVarint(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, 1 << 31, -(1 << 31) - 1, math.MaxInt64, math.MinInt64} {
		b := AppendVarint(nil, v)
		if len(b) != VarintLen(v) {
			t.Errorf("%d: %d bytes, VarintLen %d", v, len(b), VarintLen(v))
		}
		got, n := Varint(b)
		if got != v || n != len(b) {
			t.Errorf("%d: read %d (%d bytes of %d)", v, got, n, len(b))
		}
	}
	// As the SDKs write them: -1 is 0x01, 1 is 0x02, 64 is 0x80 0x01.
	if b := AppendVarint(nil, -1); !bytes.Equal(b, []byte{1}) {
		t.Errorf("-1: % x", b)
	}
	if b := AppendVarint(nil, 64); !bytes.Equal(b, []byte{0x80, 1}) {
		t.Errorf("64: % x", b)
	}
	if _, n := Varint([]byte{0x80}); n != 0 {
		t.Errorf("short varint: n = %d", n)
	}
	if _, n := Varint(bytes.Repeat([]byte{0x80}, 11)); n != -1 {
		t.Errorf("long varint: n = %d", n)
	}
}

func TestRecord(t *testing.T) {
	r := record.Record{Key: []byte("k"), Value: nil, Headers: []record.Header{{Key: "a", Value: []byte("1")}, {Key: "b"}, {Key: "", Value: []byte{}}},
		Timestamp: time.UnixMilli(5)}
	b := AppendRecord(nil, &r)
	if len(b) != RecordSize(&r) {
		t.Fatalf("%d bytes, RecordSize %d", len(b), RecordSize(&r))
	}
	// key "k", value null, 3 headers: a=1, b=null, ""="".
	want := []byte{2, 'k', 1, 6, 2, 'a', 2, '1', 2, 'b', 1, 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("payload % x, want % x", b, want)
	}
	key, value, headers, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(key) != "k" || value != nil || len(headers) != 3 || headers[0].Key != "a" || string(headers[0].Value) != "1" ||
		headers[1].Value != nil || headers[2].Value == nil {
		t.Fatalf("decoded %q %q %+v", key, value, headers)
	}
	b[1] = 'x'
	if string(key) != "k" {
		t.Fatal("the decoded key shares memory with the payload")
	}
	for _, bad := range []struct {
		b   []byte
		msg string
	}{
		{nil, "key length at byte 0: ends too soon"},
		{[]byte{2, 'k'}, "value length at byte 2: ends too soon"},
		{[]byte{4, 'k'}, "key at byte 1: length 2 with 1 bytes left"},
		{[]byte{3}, "key at byte 1: length -2"},
		{[]byte{1, 1, 4}, "header count at byte 3: count 2 with 0 bytes left"},
		{[]byte{1, 1, 0, 0}, "record at byte 3: 1 bytes after its end"},
	} {
		if _, _, _, err := DecodeRecord(bad.b); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("% x: %v, want %q", bad.b, err, bad.msg)
		}
	}
}

func TestOptions(t *testing.T) {
	topic, err := DecodeOptions([]byte{1, 6, 'a', 'b', 'c'})
	if err != nil || topic != "abc" {
		t.Fatalf("%q %v", topic, err)
	}
	for _, bad := range [][]byte{nil, {2, 2, 'a'}, {1, 1}, {1, 4, 'a'}, {1, 2, 'a', 'b'}} {
		if _, err := DecodeOptions(bad); err == nil {
			t.Errorf("% x: no error", bad)
		}
	}
}

func TestSchema(t *testing.T) {
	s := Schema{Format: FormatProtobuf, Text: "syntax = \"proto3\";", References: []Reference{{Name: "a.proto", Subject: "a", Version: 3}}}
	got, err := DecodeSchema(AppendSchema(nil, &s))
	if err != nil || got.Format != s.Format || got.Text != s.Text || len(got.References) != 1 || got.References[0] != s.References[0] {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := DecodeSchema([]byte{6, 0, 0}); err == nil || !strings.Contains(err.Error(), "schema format 3") {
		t.Errorf("format 3: %v", err)
	}
	ss := AppendSubjectSchema(nil, 7, 2, &s)
	if id, n := Varint(ss); id != 7 || n != 1 {
		t.Errorf("subject schema starts % x", ss[:2])
	}
}

// FuzzDecode: the decoders of guest bytes never panic, and a record
// DecodeRecord accepts encodes to bytes that decode to the same record (a
// null header key is read as an empty one).
func FuzzDecode(f *testing.F) {
	r := record.Record{Key: []byte("k"), Headers: []record.Header{{Key: "a", Value: []byte("1")}}}
	f.Add(AppendRecord(nil, &r))
	f.Add([]byte{1, 6, 'a', 'b', 'c'})
	s := Schema{Text: "{}", References: []Reference{{"n", "s", 1}}}
	f.Add(AppendSchema(nil, &s))
	f.Fuzz(func(t *testing.T, b []byte) {
		if key, value, headers, err := DecodeRecord(b); err == nil {
			back := AppendRecord(nil, &record.Record{Key: key, Value: value, Headers: headers})
			k2, v2, h2, err := DecodeRecord(back)
			if err != nil || !sameBytes(key, k2) || !sameBytes(value, v2) || len(headers) != len(h2) {
				t.Fatalf("% x decodes and encodes back as % x (%v)", b, back, err)
			}
			for i := range headers {
				if headers[i].Key != h2[i].Key || !sameBytes(headers[i].Value, h2[i].Value) {
					t.Fatalf("% x: header %d changed on the way back", b, i)
				}
			}
		}
		_, _ = DecodeOptions(b)
		_, _ = DecodeSchema(b)
	})
}

// sameBytes reports whether a and b are equal, null and empty told apart.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
