package abi_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime/internal/abi"
	"github.com/streamd/streamd/sdk/go/streamd"
)

// The Go SDK's pure code is the reference guest: a copying identity.
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

func sample() []record.Record {
	return []record.Record{
		{Partition: -1, Offset: -1},
		{Key: []byte{}, Value: []byte{}, Timestamp: time.UnixMilli(0).UTC(), Topic: "t"},
		{Key: []byte{0, 0xff}, Value: []byte("keep"), Timestamp: time.UnixMilli(-5).UTC(), Partition: 7, Offset: 1 << 40,
			Headers: []record.Header{{Key: "a"}, {Key: "", Value: []byte{}}, {Key: "a", Value: []byte("again")}}},
		{Key: []byte("k"), Value: []byte("reject")},
		{Key: []byte("k"), Value: []byte("drop")},
		{Key: []byte("k"), Value: []byte("twice"), Headers: []record.Header{{Key: "ü", Value: []byte("✓")}}, Timestamp: time.UnixMilli(1767225600123).UTC()},
	}
}

func TestRoundTrip(t *testing.T) {
	in := sample()
	n, err := abi.RequestSize(in)
	if err != nil {
		t.Fatal(err)
	}
	req := make([]byte, n)
	abi.EncodeRequest(req, abi.OpTransform, in)
	status, reply := streamd.Process(req)
	if status != streamd.StatusOK {
		t.Fatalf("status %d: %s", status, reply)
	}
	res, err := abi.DecodeResult(bytes.Clone(reply), in, errors.New)
	if err != nil {
		t.Fatal(err)
	}
	wantCount := []int{1, 1, 1, 0, 0, 2}
	for i, r := range res {
		if i == 3 {
			if r.Err == nil || r.Err.Error() != "no thanks" {
				t.Fatalf("record 3: %+v", r)
			}
			continue
		}
		if len(r.Records) != wantCount[i] {
			t.Fatalf("record %d: %d outputs, want %d", i, len(r.Records), wantCount[i])
		}
		for _, out := range r.Records {
			if !same(out, in[i]) {
				t.Fatalf("record %d:\n got  %+v\n want %+v", i, out, in[i])
			}
		}
	}
}

func same(a, b record.Record) bool {
	eq := func(x, y []byte) bool { return (x == nil) == (y == nil) && bytes.Equal(x, y) }
	if !eq(a.Key, b.Key) || !eq(a.Value, b.Value) || !a.Timestamp.Equal(b.Timestamp) ||
		a.Partition != b.Partition || a.Offset != b.Offset || a.Topic != b.Topic || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !eq(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

func TestMalformed(t *testing.T) {
	u32 := func(vs ...uint32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	in := make([]record.Record, 1)
	tests := []struct {
		name  string
		reply []byte
		want  string
	}{
		{"empty", nil, "at byte 0: short count"},
		{"wrong count", u32(2), "at byte 0: count 2, want 1"},
		{"no entry", u32(1), "at byte 4: short entry status"},
		{"bad status", u32(1, 9), "at byte 4: entry 0: unknown status 9"},
		{"msg past end", u32(1, 1, 50), "at byte 12: msg length 50 past the end"},
		{"record past end", u32(1, 0, 1, 100), "at byte 12: record size 100 past the end"},
		{"trailing", append(u32(1, 0, 0xFFFFFFFF), 0), "at byte 12: 1 bytes after the last entry"},
		{"size mismatch", append(u32(1, 0, 1, 33), make([]byte, 33)...), "record size 33 but its fields take 32"},
		{"negative key len", append(append(u32(1, 0, 1, 32), make([]byte, 20)...), u32(0xFFFFFFF0, 0, 0)...), "key length -16 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := abi.DecodeResult(tt.reply, in, errors.New)
			var me *abi.MalformedError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want a MalformedError containing %q", err, tt.want)
			}
		})
	}
}

func FuzzDecodeResult(f *testing.F) {
	in := sample()
	n, _ := abi.RequestSize(in)
	req := make([]byte, n)
	abi.EncodeRequest(req, abi.OpTransform, in)
	_, reply := streamd.Process(req)
	f.Add(bytes.Clone(reply), uint8(len(in)))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, uint8(1))
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 'a', 'b', 'c'}, uint8(1))
	f.Fuzz(func(t *testing.T, reply []byte, n uint8) {
		in := make([]record.Record, n)
		res, err := abi.DecodeResult(reply, in, errors.New)
		if err != nil {
			return
		}
		if len(res) != len(in) {
			t.Fatalf("%d results for %d records", len(res), len(in))
		}
	})
}

// FuzzProcess fuzzes the Go SDK's request decoder with arbitrary requests.
func FuzzProcess(f *testing.F) {
	in := sample()
	n, _ := abi.RequestSize(in)
	req := make([]byte, n)
	abi.EncodeRequest(req, abi.OpTransform, in)
	f.Add(req)
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, req []byte) {
		status, reply := streamd.Process(req)
		if status == streamd.StatusInternal {
			t.Fatalf("SDK panicked on a request: %s", reply)
		}
	})
}
