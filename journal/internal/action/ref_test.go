package action

// The struct-based decoders that the reflection-free ones replaced, kept as
// the reference the differential fuzzers compare against.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

func decodeHeaderRef(b []byte) (Header, error) {
	var top struct {
		Append, Mark, Delete, Purge json.RawMessage
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return Header{}, malformed("header is not a JSON object: %v", err)
	}
	// The original tries the names in this order and takes the first whose
	// value is an object.
	var (
		k   Kind
		raw json.RawMessage
	)
	switch {
	case isObject(top.Append):
		k, raw = KindAppend, top.Append
	case isObject(top.Mark):
		k, raw = KindMark, top.Mark
	case isObject(top.Delete):
		k, raw = KindDelete, top.Delete
	case isObject(top.Purge):
		k, raw = KindPurge, top.Purge
	default:
		return Header{Kind: KindUnknown}, nil
	}
	var f struct {
		Range                        json.RawMessage
		From, To                     json.RawMessage
		ID                           json.RawMessage
		Origin, Version, PayloadType json.RawMessage
		Metadata                     json.RawMessage
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return Header{}, malformed("%s: %v", k, err)
	}
	h := Header{Kind: k}
	var err error
	if h.Origin, err = optString(f.Origin, "origin"); err != nil {
		return Header{}, malformed("%s: %v", k, err)
	}
	if h.Version, err = optString(f.Version, "version"); err != nil {
		return Header{}, malformed("%s: %v", k, err)
	}
	switch k {
	case KindAppend:
		if f.Range == nil {
			return Header{}, malformed("append: missing range")
		}
		var rf struct{ From, To json.RawMessage }
		if !isObject(f.Range) {
			return Header{}, malformed("append: range is not an object")
		}
		if err := json.Unmarshal(f.Range, &rf); err != nil {
			return Header{}, malformed("append: range: %v", err)
		}
		if h.From, err = seqNr(rf.From, "from"); err != nil {
			return Header{}, malformed("append: range: %v", err)
		}
		if h.To, err = seqNr(rf.To, "to"); err != nil {
			return Header{}, malformed("append: range: %v", err)
		}
		if h.From > h.To {
			return Header{}, malformed("append: range from %d > to %d", h.From, h.To)
		}
		pt, err := optString(f.PayloadType, "payloadType")
		if err != nil {
			return Header{}, malformed("append: %v", err)
		}
		if pt != FormatJSON && pt != FormatBinary {
			return Header{}, malformed("append: payloadType %q is not json or binary", pt)
		}
		h.PayloadType = pt
		// A metadata that is not an object means empty, as in the original.
		h.Legacy = f.Metadata == nil
		if isObject(f.Metadata) {
			var mf struct{ Data json.RawMessage }
			if err := json.Unmarshal(f.Metadata, &mf); err != nil {
				return Header{}, malformed("append: metadata: %v", err)
			}
			if mf.Data != nil && !isNull(mf.Data) {
				h.Metadata = compact(mf.Data)
			}
		}
	case KindDelete:
		if h.To, err = seqNr(f.To, "to"); err != nil {
			return Header{}, malformed("delete: %v", err)
		}
	case KindMark:
		if f.ID == nil {
			return Header{}, malformed("mark: missing id")
		}
		if err := json.Unmarshal(f.ID, &h.ID); err != nil {
			return Header{}, malformed("mark: id is not a string")
		}
	}
	return h, nil
}

type eventFields struct {
	SeqNr, Tags, PayloadType, Payload json.RawMessage
}

func decodeJSONRef(b []byte) (*Events, error) {
	var top struct {
		Events   []*eventFields
		Metadata json.RawMessage
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, malformed("json payload: %v", err)
	}
	if len(top.Events) == 0 {
		return nil, malformed("json payload: no events")
	}
	e := &Events{Events: make([]Event, 0, len(top.Events))}
	for i, f := range top.Events {
		if f == nil {
			return nil, malformed("json payload: event %d is not an object", i)
		}
		var ev Event
		var err error
		if ev.SeqNr, err = seqNr(f.SeqNr, "seqNr"); err != nil {
			return nil, malformed("json payload: event %d: %v", i, err)
		}
		if f.Tags != nil && !isNull(f.Tags) {
			if err := json.Unmarshal(f.Tags, &ev.Tags); err != nil {
				return nil, malformed("json payload: event %d: tags is not a list of strings", i)
			}
			if len(ev.Tags) == 0 {
				ev.Tags = nil
			}
		}
		pt, err := optString(f.PayloadType, "payloadType")
		if err != nil {
			return nil, malformed("json payload: event %d: %v", i, err)
		}
		raw := f.Payload
		has := raw != nil && !isNull(raw)
		switch {
		case !has:
			ev.Kind = PayloadNone
		case pt == "" || pt == "json":
			ev.Kind, ev.Payload = PayloadJSON, compact(raw)
		case pt == "text":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, malformed("json payload: event %d: text payload is not a string", i)
			}
			ev.Kind, ev.Payload = PayloadText, []byte(s)
		default:
			return nil, malformed("json payload: event %d: payloadType %q is not json or text", i, pt)
		}
		e.Events = append(e.Events, ev)
	}
	if top.Metadata == nil || isNull(top.Metadata) {
		e.Legacy = true
		return e, nil
	}
	m, err := decodeMetadataRef(top.Metadata)
	if err != nil {
		return nil, malformed("json payload: %v", err)
	}
	e.Metadata = m
	return e, nil
}

func decodeMetadataRef(raw []byte) (Metadata, error) {
	var f struct{ Data, ExpireAfter json.RawMessage }
	if !isObject(raw) {
		return Metadata{}, fmt.Errorf("metadata is not a JSON object")
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return Metadata{}, fmt.Errorf("metadata is not a JSON object")
	}
	var m Metadata
	if d := f.Data; d != nil && !isNull(d) {
		m.Data = compact(d)
	}
	if x := f.ExpireAfter; x != nil && !isNull(x) {
		d, err := parseExpireAfter(x)
		if err != nil {
			return Metadata{}, fmt.Errorf("metadata: expireAfter: %v", err)
		}
		m.ExpireAfter, m.ExpireAfterRaw = d, compact(x)
	}
	return m, nil
}

func FuzzHeaderDifferential(f *testing.F) {
	for _, s := range []string{`{"append":{"range":{"from":1,"to":2},"payloadType":"json","metadata":{"data":[1]}}}`,
		`{"Delete":{"TO":3}}`, `{"mark":{"id":"x\u0041","id":null}}`, `null`, `{"purge":{},"purge":1}`, `{"append":{"range":{"from":1,"to":1},"payloadType":"binary","metadata":5}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h1, err1 := DecodeHeader(b)
		h2, err2 := decodeHeaderRef(b)
		if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(h1, h2) {
			t.Fatalf("%q:\nfast %+v %v\nref  %+v %v", b, h1, err1, h2, err2)
		}
	})
}

func FuzzPayloadDifferential(f *testing.F) {
	for _, s := range []string{`{"events":[{"seqNr":1,"tags":["a",null],"payloadType":"text","payload":"x\n"}],"metadata":{"expireAfter":"1 day","data":{}}}`,
		`{"Events":[{"SEQNR":2}]}`, `null`, `{"events":[null]}`, `{"events":5}`, `{"events":[{"seqNr":1,"payload":[ 1 , 2 ]}],"metadata":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e1, err1 := decodeJSON(b)
		e2, err2 := decodeJSONRef(b)
		if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(e1, e2) {
			t.Fatalf("%q:\nfast %+v %v\nref  %+v %v", b, e1, err1, e2, err2)
		}
	})
}

var _ = bytes.TrimSpace
var _ = fmt.Sprint

// BenchmarkDecode compares the decoders with the struct-based reference on
// a typical Append (header + 1-event json payload): the ratio is the gain.
func BenchmarkDecode(b *testing.B) {
	hdr := []byte(`{"append":{"range":{"from":41,"to":41},"origin":"host-1","version":"4.1.0","payloadType":"json","metadata":{}}}`)
	pay := []byte(`{"events":[{"seqNr":41,"tags":["order"],"payloadType":"json","payload":{"order":"o-1","seq":41,"amount":12.5,"currency":"EUR","items":["sku-1","sku-2"]}}],"metadata":{}}`)
	b.Run("fields", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := DecodeHeader(hdr); err != nil {
				b.Fatal(err)
			}
			if _, err := decodeJSON(pay); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := decodeHeaderRef(hdr); err != nil {
				b.Fatal(err)
			}
			if _, err := decodeJSONRef(pay); err != nil {
				b.Fatal(err)
			}
		}
	})
}
