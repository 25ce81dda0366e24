package streamd

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// request encodes a request batch the way the host does.
func request(op Op, recs ...Record) []byte {
	b := le.AppendUint32(nil, uint32(op))
	b = le.AppendUint32(b, uint32(len(recs)))
	for i := range recs {
		r := recs[i]
		r.Partition, r.Offset = 3, 40+int64(i)
		enc := oldAppendRecord(nil, &r) // the frozen encoder: not the code under test
		// It writes -1 for offset and partition; put them back.
		binary.LittleEndian.PutUint64(enc[4:], uint64(r.Offset))
		binary.LittleEndian.PutUint32(enc[20:], uint32(r.Partition))
		b = append(b, enc...)
	}
	return b
}

// decodeOne decodes one record entry (its size and body) as the SDK decodes
// a request's.
func decodeOne(entry []byte) (Record, error) {
	recs, err := (&plugin{}).decodeRequest(entry, 1)
	if err != nil {
		return Record{}, err
	}
	return recs[0], nil
}

// result decodes a result batch into per-entry summaries.
func result(t *testing.T, b []byte) []string {
	t.Helper()
	n := le.Uint32(b)
	b = b[4:]
	var out []string
	for range n {
		status, c := le.Uint32(b), le.Uint32(b[4:])
		b = b[8:]
		switch {
		case status == 1:
			out = append(out, "reject:"+string(b[:c]))
			b = b[c:]
		case c == math.MaxUint32:
			out = append(out, "keep")
		default:
			var vals []string
			for range c {
				size := le.Uint32(b)
				r, err := decodeOne(b[:4+size])
				if err != nil {
					t.Fatal(err)
				}
				vals = append(vals, string(r.Value))
				b = b[4+size:]
			}
			out = append(out, "records:"+strings.Join(vals, ","))
		}
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left over", len(b))
	}
	return out
}

func TestTransform(t *testing.T) {
	p := &plugin{transform: func(r *Record) ([]Record, error) {
		switch v := string(r.Value); v {
		case "keep":
			return nil, KeepRecord
		case "drop":
			return nil, nil
		case "bad":
			return nil, errors.New("bad record")
		case "split":
			return []Record{{Value: []byte("a")}, {Value: []byte("b")}}, nil
		case "fail":
			return nil, BatchError(errors.New("cannot go on"))
		case "panic":
			panic("oops")
		default:
			r.Value = bytes.ToUpper(r.Value)
			if r.Partition != 3 || r.Offset < 40 {
				return nil, errors.New("position lost")
			}
			r.SetHeader("x", []byte("1"))
			return One(*r), nil
		}
	}}
	status, reply := p.process(request(OpTransform, Record{Value: []byte("x")}, Record{Value: []byte("keep")},
		Record{Value: []byte("drop")}, Record{Value: []byte("bad")}, Record{Value: []byte("split")}))
	if status != StatusOK {
		t.Fatalf("status %d: %s", status, reply)
	}
	got := strings.Join(result(t, reply), " ")
	if want := "records:X keep records: reject:bad record records:a,b"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if status, reply := p.process(request(OpTransform, Record{Value: []byte("x")}, Record{Value: []byte("fail")})); status != StatusBatch || string(reply) != "cannot go on" {
		t.Fatalf("batch error: %d %s", status, reply)
	}
	if status, reply := p.process(request(OpTransform, Record{Value: []byte("panic")})); status != StatusInternal || !strings.Contains(string(reply), "oops") {
		t.Fatalf("panic: %d %s", status, reply)
	}
	if status, _ := p.process(request(OpEncode, Record{})); status != StatusUnsupported {
		t.Fatalf("encode on a transform: %d", status)
	}
}

func TestMalformedRequest(t *testing.T) {
	p := &plugin{transform: func(r *Record) ([]Record, error) { return nil, KeepRecord }}
	good := request(OpTransform, Record{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{Key: "h", Value: []byte("x")}}})
	tests := map[string][]byte{
		"short":        good[:5],
		"count":        append(le.AppendUint32(le.AppendUint32(nil, 1), 2), good[8:]...),
		"truncated":    good[:len(good)-1],
		"trailing":     append(bytes.Clone(good), 0),
		"size too big": append(le.AppendUint32(good[:8:8], 1000), good[12:]...),
	}
	for name, req := range tests {
		if status, reply := p.process(req); status != StatusBatch {
			t.Errorf("%s: status %d (%s), want ERR_BATCH", name, status, reply)
		}
	}
	if status, reply := p.process(good); status != StatusOK {
		t.Fatalf("good request: %d %s", status, reply)
	}
}

func TestCodecAndSink(t *testing.T) {
	c := &plugin{
		encode: func(b []byte) ([]byte, error) { return append([]byte("<"), b...), nil },
		decode: func(b []byte) ([]byte, error) { return nil, errors.New("nope") },
	}
	_, reply := c.process(request(OpEncode, Record{Value: []byte("p")}))
	if got := result(t, reply); len(got) != 1 || got[0] != "records:<p" {
		t.Fatalf("encode: %v", got)
	}
	_, reply = c.process(request(OpDecode, Record{Value: []byte("p")}))
	if got := result(t, reply); len(got) != 1 || got[0] != "reject:nope" {
		t.Fatalf("decode: %v", got)
	}
	// A null payload (a tombstone) is kept, not given to the codec; a nil
	// result for a payload is an empty value, not null.
	e := &plugin{encode: func(b []byte) ([]byte, error) {
		if b == nil {
			t.Error("codec called with a null payload")
		}
		return nil, nil
	}}
	_, reply = e.process(request(OpEncode, Record{Value: nil}, Record{Value: []byte("x")}))
	if got := strings.Join(result(t, reply), " "); got != "keep records:" {
		t.Fatalf("null payload: %s", got)
	}
	// the second entry's record: count, keep entry, status, out_count, size
	if r, err := decodeOne(reply[20:]); err != nil || r.Value == nil {
		t.Fatalf("nil result: value %q (nil %v), %v; want empty, not null", r.Value, r.Value == nil, err)
	}
	var written []string
	s := &plugin{sink: func(r *Record) error {
		if string(r.Value) == "no" {
			return errors.New("refused")
		}
		written = append(written, string(r.Value))
		return nil
	}}
	_, reply = s.process(request(OpWrite, Record{Value: []byte("a")}, Record{Value: []byte("no")}))
	if got := strings.Join(result(t, reply), " "); got != "records: reject:refused" || strings.Join(written, ",") != "a" {
		t.Fatalf("sink: %s, wrote %v", got, written)
	}
}

func TestManifest(t *testing.T) {
	var p plugin
	if status, _ := p.doManifest(); status != StatusInternal {
		t.Fatalf("unregistered manifest status %d", status)
	}
	registered = plugin{}
	defer func() { registered = plugin{} }()
	Sink(Manifest{Name: "s", Version: "2.0.0"}, func(*Record) error { return nil })
	_, b := registered.doManifest()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["name"] != "s" || m["kind"] != "sink" || m["version"] != "2.0.0" || m["abi"] != float64(1) {
		t.Fatalf("manifest %s (%v)", b, err)
	}
	OnInit(func(cfg []byte) error {
		if string(cfg) != "{}" {
			return errors.New("want {}")
		}
		return nil
	})
	if status, _ := registered.doInit([]byte("{}")); status != StatusOK {
		t.Fatal("init refused {}")
	}
	if status, msg := registered.doInit([]byte(`{"x":1}`)); status != StatusConfig || string(msg) != "want {}" {
		t.Fatalf("init: %d %s", status, msg)
	}
}

func TestSetHeader(t *testing.T) {
	r := Record{Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: "v", Value: []byte("2")}, {Key: "b"}, {Key: "v"}}}
	r.SetHeader("v", []byte("1"))
	var keys []string
	for _, h := range r.Headers {
		keys = append(keys, h.Key+"="+string(h.Value))
	}
	if got := strings.Join(keys, " "); got != "a=1 b= v=1" {
		t.Fatalf("headers %s", got)
	}
	if v, ok := r.Header("v"); !ok || string(v) != "1" {
		t.Fatal("Header(v)")
	}
}
