package abi_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime/internal/abi"
	"github.com/streamd/streamd/sdk/go/streamd"
)

// The Go SDK's copying identity that answers these tests' requests is
// registered in decode_test.go (init), for this package's tests as well.

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

// encode encodes a request batch of recs into a buffer of exactly its size.
func encode(tb testing.TB, op streamd.Op, recs []record.Record) []byte {
	tb.Helper()
	size, err := abi.RequestSize(recs)
	if err != nil {
		tb.Fatal(err)
	}
	req := make([]byte, size)
	if n, ok := abi.EncodeRequest(req, op, recs); !ok || n != size {
		tb.Fatalf("EncodeRequest into %d bytes: %d, %v", size, n, ok)
	}
	return req
}

func TestRoundTrip(t *testing.T) {
	in := sample()
	req := encode(t, streamd.OpTransform, in)
	status, reply := streamd.Process(req)
	if status != streamd.StatusOK {
		t.Fatalf("status %d: %s", status, reply)
	}
	// The decoder must not keep the reply: the host reuses its buffer.
	reply = bytes.Clone(reply)
	res, err := abi.DecodeResult(reply, in, errors.New)
	if err != nil {
		t.Fatal(err)
	}
	clear(reply)
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

// TestDecodeResultOwned: given the reply to keep, the decoder makes the
// output records point into it rather than into a copy (kept true), and
// says so; a batch with no output records keeps nothing of it.
func TestDecodeResultOwned(t *testing.T) {
	in := sample()
	_, reply := streamd.Process(encode(t, streamd.OpTransform, in))
	reply = bytes.Clone(reply)
	res, kept, err := abi.DecodeResultOwned(reply, in, errors.New)
	if err != nil || !kept {
		t.Fatalf("kept %v, err %v; want the reply kept", kept, err)
	}
	start, end := &reply[0], &reply[len(reply)-1]
	n := 0
	for i, r := range res {
		for _, out := range r.Records {
			if !same(out, in[i]) {
				t.Fatalf("record %d:\n got  %+v\n want %+v", i, out, in[i])
			}
			if len(out.Value) > 0 && &out.Value[0] != &in[i].Value[0] {
				if p := &out.Value[0]; uintptr(unsafe.Pointer(p)) < uintptr(unsafe.Pointer(start)) || uintptr(unsafe.Pointer(p)) > uintptr(unsafe.Pointer(end)) {
					t.Fatalf("record %d: its value is not in the reply it was given", i)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no output record to check")
	}
	keep := []byte{1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff} // one KEEP
	res, kept, err = abi.DecodeResultOwned(keep, in[:1], errors.New)
	if err != nil || kept || len(res) != 1 || &res[0].Records[0] != &in[0] {
		t.Fatalf("KEEP: %+v, kept %v, err %v; want the input itself and nothing kept", res, kept, err)
	}
}

// TestEncodeRequest: the encoding is the documented layout, byte for
// byte, and a dst too short for it is refused, never overrun.
func TestEncodeRequest(t *testing.T) {
	u32 := binary.LittleEndian.AppendUint32
	u64 := binary.LittleEndian.AppendUint64
	rec := func(b []byte, f func([]byte) []byte) []byte {
		body := f(nil)
		return append(u32(b, uint32(len(body))), body...)
	}
	tests := []struct {
		name string
		op   streamd.Op
		recs []record.Record
		want []byte
	}{
		{"empty", streamd.OpWrite, nil, u32(u32(nil, 4), 0)},
		{"nulls", streamd.OpTransform, []record.Record{{Partition: -1, Offset: -1}},
			rec(u32(u32(nil, 1), 1), func(b []byte) []byte {
				b = u64(u64(b, 0xFFFFFFFFFFFFFFFF), 0xFFFFFFFFFFFFFFFF)  // offset -1, no timestamp
				b = u32(u32(u32(b, 0xFFFFFFFF), 0xFFFFFFFF), 0xFFFFFFFF) // partition -1, null key, null value
				return u32(b, 0)                                         // no headers
			})},
		{"fields", streamd.OpDecode, []record.Record{{Key: []byte{}, Value: []byte("value"), Timestamp: time.UnixMilli(1767225600123),
			Partition: 7, Offset: 1 << 40, Headers: []record.Header{{Key: "h", Value: nil}, {Key: "", Value: []byte("xyz")}}}},
			rec(u32(u32(nil, 3), 1), func(b []byte) []byte {
				b = u32(u64(u64(b, 1<<40), 1767225600123), 7)
				b = append(u32(u32(b, 0), 5), "value"...)
				b = u32(b, 2)
				b = u32(append(u32(b, 1), 'h'), 0xFFFFFFFF)
				return append(u32(u32(b, 0), 3), "xyz"...)
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := encode(t, tt.op, tt.recs); !bytes.Equal(got, tt.want) {
				t.Fatalf("encoded\n got  %x\n want %x", got, tt.want)
			}
			// More room is fine; the batch is written at the start.
			room := bytes.Repeat([]byte{0xAA}, len(tt.want)+10)
			if n, ok := abi.EncodeRequest(room, tt.op, tt.recs); !ok || !bytes.Equal(room[:n], tt.want) || room[n] != 0xAA {
				t.Fatalf("into %d bytes: %d, %v: %x", len(room), n, ok, room)
			}
			// Less room is refused without writing past it.
			for short := range len(tt.want) {
				dst := make([]byte, short, short+8)
				if _, ok := abi.EncodeRequest(dst, tt.op, tt.recs); ok {
					t.Fatalf("into %d bytes: ok", short)
				}
				if tail := dst[short : short+8]; !bytes.Equal(tail, make([]byte, 8)) {
					t.Fatalf("into %d bytes: wrote past the end: %x", short, tail)
				}
			}
		})
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
		{"short value len", append(append(append(u32(1, 0, 1, 26), make([]byte, 20)...), u32(0xFFFFFFFF)...), 0, 0), "at byte 40: short value length"},
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

// FuzzDecodeResult feeds the decoder what a hostile guest could reply. It
// must not panic; a reply it accepts must give one result per input, KEEP
// results must be the input record itself, and no result may keep a
// reference to the reply buffer, which the host reuses.
func FuzzDecodeResult(f *testing.F) {
	in := sample()
	_, reply := streamd.Process(encode(f, streamd.OpTransform, in))
	f.Add(bytes.Clone(reply), uint8(len(in)))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, uint8(1))
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 'a', 'b', 'c'}, uint8(1))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff}, uint8(2))
	f.Fuzz(func(t *testing.T, reply []byte, n uint8) {
		in := make([]record.Record, n)
		for i := range in {
			in[i].Offset = int64(i)
		}
		res, err := abi.DecodeResult(reply, in, errors.New)
		if err != nil {
			var me *abi.MalformedError
			if !errors.As(err, &me) || me.Pos < 0 || me.Pos > len(reply) {
				t.Fatalf("error %v is not a MalformedError within the reply", err)
			}
			return
		}
		if len(res) != len(in) {
			t.Fatalf("%d results for %d records", len(res), len(in))
		}
		again, err := abi.DecodeResult(bytes.Clone(reply), in, errors.New)
		if err != nil {
			t.Fatalf("second decode: %v", err)
		}
		for i := range reply {
			reply[i] ^= 0xFF
		}
		for i, r := range res {
			if (r.Err == nil) != (again[i].Err == nil) || r.Err != nil && r.Err.Error() != again[i].Err.Error() ||
				len(r.Records) != len(again[i].Records) {
				t.Fatalf("result %d changed with the reply buffer: %+v, %+v", i, r, again[i])
			}
			for j := range r.Records {
				if !same(r.Records[j], again[i].Records[j]) {
					t.Fatalf("result %d record %d changed with the reply buffer", i, j)
				}
				if r.Records[j].Offset != int64(i) {
					t.Fatalf("result %d record %d has offset %d", i, j, r.Records[j].Offset)
				}
			}
			if len(r.Records) == 1 && cap(r.Records) == 1 && &r.Records[0] == &in[i] != (&again[i].Records[0] == &in[i]) {
				t.Fatalf("result %d: KEEP aliasing differs", i)
			}
		}
	})
}

// FuzzEncodeRequest encodes records made from fuzz input into buffers of
// every size around the exact one: too short is refused, enough gives
// exactly RequestSize bytes, and the Go SDK decodes them back (its copying
// identity sends them back unchanged).
func FuzzEncodeRequest(f *testing.F) {
	f.Add([]byte("k\x00v\x00h\x00x"), uint8(3), int64(1767225600123), uint8(2))
	f.Add([]byte{}, uint8(0), int64(-1), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, nrec uint8, ms int64, slack uint8) {
		parts := bytes.Split(data, []byte{0})
		recs := make([]record.Record, nrec%8)
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
		for i := range recs {
			r := &recs[i]
			r.Key, r.Value, r.Partition, r.Offset = next(), next(), int32(i), ms+int64(i)
			if ms != -1 && ms > -1e15 && ms < 1e15 {
				r.Timestamp = time.UnixMilli(ms).UTC()
			}
			for range int(slack % 3) {
				r.Headers = append(r.Headers, record.Header{Key: string(next()), Value: next()})
			}
		}
		size, err := abi.RequestSize(recs)
		if err != nil {
			t.Fatal(err)
		}
		short := make([]byte, max(0, size-1-int(slack)))
		if _, ok := abi.EncodeRequest(short, streamd.OpTransform, recs); ok {
			t.Fatalf("encoded %d bytes into %d", size, len(short))
		}
		req := make([]byte, size+int(slack))
		n, ok := abi.EncodeRequest(req, streamd.OpTransform, recs)
		if !ok || n != size {
			t.Fatalf("EncodeRequest: %d, %v; RequestSize %d", n, ok, size)
		}
		status, reply := streamd.Process(req[:n])
		if status != streamd.StatusOK {
			t.Fatalf("SDK status %d: %s", status, reply)
		}
		res, err := abi.DecodeResult(reply, recs, errors.New)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			switch string(recs[i].Value) {
			case "reject", "drop", "twice": // see init
				continue
			}
			if len(r.Records) != 1 || !same(r.Records[0], recs[i]) {
				t.Fatalf("record %d:\n got  %+v\n want %+v", i, r.Records, recs[i])
			}
		}
	})
}

// FuzzProcess fuzzes the Go SDK's request decoder with arbitrary requests.
func FuzzProcess(f *testing.F) {
	f.Add(encode(f, streamd.OpTransform, sample()))
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, req []byte) {
		status, reply := streamd.Process(req)
		if status == streamd.StatusInternal {
			t.Fatalf("SDK panicked on a request: %s", reply)
		}
	})
}
