package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/streamd/streamd/internal/x/jsonscan"
)

// FuzzFrame: the framing and message-index parsers take any bytes without
// panicking, and what they accept they write back the same way.
func FuzzFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 7, 0, 1})
	f.Add([]byte{0, 0, 0, 1, 0, 4, 2, 0})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Add([]byte{1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, rest, err := ParseFrame(b)
		if err != nil {
			return
		}
		if got := AppendFrame(nil, id); !bytes.Equal(got, b[:5]) {
			t.Fatalf("frame %x -> id %d -> %x", b[:5], id, got)
		}
		idx, tail, err := ParseIndexes(rest)
		if err != nil {
			return
		}
		if len(idx) == 0 || len(idx) > maxIndexes || len(tail) > len(rest) {
			t.Fatalf("indexes %v, tail %d of %d", idx, len(tail), len(rest))
		}
		again, _, err := ParseIndexes(AppendIndexes(nil, idx))
		if err != nil || len(again) != len(idx) {
			t.Fatalf("indexes %v do not round-trip: %v %v", idx, again, err)
		}
	})
}

// FuzzAvroDecode: any bytes after the frame either fail to decode with an
// error or decode to valid JSON that encodes back to data that decodes to
// the same JSON.
func FuzzAvroDecode(f *testing.F) {
	s, err := compileAvro(allTypes, nil)
	if err != nil {
		f.Fatal(err)
	}
	ref, err := refAPI.Marshal(avro.MustParse(allTypes), allValue())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ref)
	f.Add(ref[:len(ref)/2])
	f.Add([]byte{0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		js, err := s.decode(nil, b)
		if err != nil {
			return
		}
		if !json.Valid(js) {
			t.Fatalf("decoded to invalid JSON: %s", js)
		}
		enc, err := s.encode(nil, js)
		if err != nil {
			t.Fatalf("decoded JSON does not encode: %v\n%s", err, js)
		}
		js2, err := s.decode(nil, enc)
		if err != nil || !bytes.Equal(js, js2) {
			t.Fatalf("round trip: %v\n%s\n%s", err, js, js2)
		}
	})
}

// FuzzProtoDecode: any bytes after the frame, message indexes included,
// decode to JSON or fail with an error.
func FuzzProtoDecode(f *testing.F) {
	p, err := compileProto(context.Background(), ordersProto, map[string]string{"acme/money.proto": moneyProto})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 0x0a, 0x03, 'o', '-', '1'})
	f.Add([]byte{2, 2, 0, 0x0a, 0x01, 'b'})
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, rest, err := ParseIndexes(b)
		if err != nil {
			return
		}
		md, err := p.message(idx)
		if err != nil {
			return
		}
		js, err := decodeProto(nil, md, rest)
		if err == nil && !json.Valid(js) {
			t.Fatalf("invalid JSON %s", js)
		}
	})
}

// FuzzAvroEncode: any bytes as the JSON to encode either fail with an
// error or encode to data that decodes to JSON that encodes to the same
// data (the encoder checks the JSON as it walks it: it must never panic
// or accept what jsonscan rejects).
func FuzzAvroEncode(f *testing.F) {
	s, err := compileAvro(allTypes, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(allJSON))
	f.Add([]byte(`{"b":true,"n":null}`))
	f.Add([]byte(`{"a":[1,2,{"x":1}],"m":{"k":"\u00e9"}}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		enc, err := s.encode(nil, js)
		if err != nil {
			return
		}
		if !jsonscan.Valid(js) {
			t.Fatalf("accepted invalid JSON %q", js)
		}
		out, err := s.decode(nil, enc)
		if err != nil {
			t.Fatalf("encoded data does not decode: %v", err)
		}
		enc2, err := s.encode(nil, out)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip: %v\n%x\n%x", err, enc, enc2)
		}
	})
}

// unionTypes has a union of null and each type encodeUnionAt takes, and
// records it must leave to pickBranch (a field named "null" or after the
// record).
const unionTypes = `{"type":"record","name":"U","fields":[
 {"name":"s","type":["null","string"]},
 {"name":"e","type":["null",{"type":"enum","name":"E","symbols":["A","B"]}]},
 {"name":"b","type":["boolean","null"]},
 {"name":"i","type":["null","int"]},
 {"name":"l","type":["null","long"]},
 {"name":"d","type":["null","double"]},
 {"name":"f","type":["null","float"]},
 {"name":"a","type":["null",{"type":"array","items":["null","string"]}]},
 {"name":"r","type":["null",{"type":"record","name":"R","fields":[{"name":"x","type":"int"},{"name":"y","type":["null","string"],"default":null}]}]},
 {"name":"n","type":["null",{"type":"record","name":"N","fields":[{"name":"null","type":"int"}]}]},
 {"name":"ts","type":["null",{"type":"long","logicalType":"timestamp-millis"}]}]}`

// slowCopy compiles text with encodeAt's fast paths off.
func slowCopy(t testing.TB, text string) *avroSchema {
	s, err := compileAvro(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[*avroNode]bool{}
	var walk func(nd *avroNode)
	walk = func(nd *avroNode) {
		if nd == nil || seen[nd] {
			return
		}
		seen[nd] = true
		nd.slow, nd.fastOther = true, -1
		for i := range nd.fields {
			nd.fields[i].quoted = ""
			walk(nd.fields[i].node)
		}
		walk(nd.items)
		for _, u := range nd.union {
			walk(u)
		}
	}
	walk(s.root)
	return s
}

// FuzzAvroEncodeFast: encodeAt's fast paths (plain strings, numbers,
// literals, nullable unions, fields in the schema's order) write exactly
// the bytes encodeAvro writes, and accept exactly what it accepts.
func FuzzAvroEncodeFast(f *testing.F) {
	type pair struct{ fast, slow *avroSchema }
	var schemas []pair
	for _, text := range []string{allTypes, unionTypes, benchOrder} {
		fast, err := compileAvro(text, nil)
		if err != nil {
			f.Fatal(err)
		}
		schemas = append(schemas, pair{fast, slowCopy(f, text)})
	}
	f.Add(uint8(0), []byte(allJSON))
	f.Add(uint8(1), []byte(`{"s":"x","e":"B","b":true,"i":-2147483648,"l":123456789012345678,"d":1e300,"f":3.5,"a":["p",null],"r":{"x":1},"n":{"null":2},"ts":"2026-01-02T03:04:05Z"}`))
	f.Add(uint8(1), []byte(`{"s":null,"e":null,"b":null,"i":null,"l":null,"d":null,"f":null,"a":null,"r":null,"n":null,"ts":null}`))
	f.Add(uint8(1), []byte(`{"s":"a\u00e9","e":"C","b":false,"i":2147483648,"l":1.0,"d":-0,"f":1e39,"a":[],"r":{"y":"z","x":2},"n":{"null":1},"ts":null}`))
	f.Add(uint8(2), []byte(`{"order_id":"o-1","customer":{"id":"c-1","name":"Customer 1"},"amount_cents":7919,"currency":"EUR","tags":["generated","batch-0"],"note":"000"}`))
	f.Fuzz(func(t *testing.T, which uint8, js []byte) {
		p := schemas[int(which)%len(schemas)]
		got, gerr := p.fast.encode(nil, js)
		want, werr := p.slow.encode(nil, js)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%s: fast err %v, slow err %v", js, gerr, werr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: fast %x, slow %x", js, got, want)
		}
	})
}

// FuzzAvroDecodeFast: decode's fast path for short plain strings writes
// exactly what value writes, and fails exactly where it fails.
func FuzzAvroDecodeFast(f *testing.F) {
	type pair struct{ fast, slow *avroSchema }
	var schemas []pair
	for _, text := range []string{allTypes, unionTypes, benchOrder} {
		fast, err := compileAvro(text, nil)
		if err != nil {
			f.Fatal(err)
		}
		schemas = append(schemas, pair{fast, slowCopy(f, text)})
	}
	for i, js := range []string{allJSON, `{"s":"x","e":"B","b":true,"i":-2,"l":1,"d":1,"f":3.5,"a":["p",null],"r":{"x":1},"n":null,"ts":null}`,
		`{"order_id":"o-1","customer":{"id":"c-1","name":"Customer é"},"amount_cents":7919,"currency":"EUR","tags":["generated","batch-0"],"note":"` + strings.Repeat("0", 70) + `"}`} {
		bin, err := schemas[i].fast.encode(nil, []byte(js))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), bin)
	}
	f.Fuzz(func(t *testing.T, which uint8, bin []byte) {
		p := schemas[int(which)%len(schemas)]
		got, gerr := p.fast.decode(nil, bin)
		want, werr := p.slow.decode(nil, bin)
		if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%x: fast %s (%v), slow %s (%v)", bin, got, gerr, want, werr)
		}
	})
}
