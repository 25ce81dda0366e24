package schema

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// allTypes covers every Avro type and logical type the JSON mapping knows.
const allTypes = `{
  "type": "record", "name": "All", "namespace": "t",
  "fields": [
    {"name": "n", "type": "null"},
    {"name": "b", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "by", "type": "bytes"},
    {"name": "s", "type": "string"},
    {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
    {"name": "a", "type": {"type": "array", "items": "int"}},
    {"name": "m", "type": {"type": "map", "values": "string"}},
    {"name": "u", "type": ["null", "string", "long"]},
    {"name": "u2", "type": ["null", {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}]},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "decf", "type": {"type": "fixed", "name": "D8", "size": 8, "logicalType": "decimal", "precision": 12, "scale": 3}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "def", "type": "string", "default": "dflt"},
    {"name": "defu", "type": ["null", "int"], "default": null},
    {"name": "defe", "type": "Color", "default": "GREEN"}
  ]
}`

type allInner struct {
	X int32 `avro:"x"`
}

type allGo struct {
	N    any               `avro:"n"`
	B    bool              `avro:"b"`
	I    int32             `avro:"i"`
	L    int64             `avro:"l"`
	F    float32           `avro:"f"`
	D    float64           `avro:"d"`
	By   []byte            `avro:"by"`
	S    string            `avro:"s"`
	E    string            `avro:"e"`
	Fx   [4]byte           `avro:"fx"`
	A    []int32           `avro:"a"`
	M    map[string]string `avro:"m"`
	U    any               `avro:"u"`
	U2   *allInner         `avro:"u2"`
	Dec  *big.Rat          `avro:"dec"`
	Decf *big.Rat          `avro:"decf"`
	Ts   time.Time         `avro:"ts"`
	Tsu  time.Time         `avro:"tsu"`
	Lts  time.Time         `avro:"lts"`
	Date time.Time         `avro:"date"`
	Tm   time.Duration     `avro:"tm"`
	UUID string            `avro:"uuid"`
	Def  string            `avro:"def"`
	Defu *int32            `avro:"defu"`
	Defe string            `avro:"defe"`
}

const allJSON = `{"n":null,"b":true,"i":-7,"l":9007199254740993,"f":1.5,"d":-2.25e-10,"by":"AAH/","s":"héllo \"q\"",` +
	`"e":"GREEN","fx":"AQIDBA==","a":[1,2,3],"m":{"k":"v"},"u":"x","u2":{"x":5},"dec":"-123.45","decf":"1234.567",` +
	`"ts":"2026-01-02T03:04:05.678Z","tsu":"2026-01-02T03:04:05.678901Z","lts":"2026-01-02T03:04:05.678","date":"2026-01-02",` +
	`"tm":"03:04:05.678","uuid":"0b6e7c4e-55b4-4f0c-9a8e-1f2f3a4b5c6d","def":"dflt","defu":null,"defe":"GREEN"}`

func allValue() allGo {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)
	return allGo{
		B: true, I: -7, L: 9007199254740993, F: 1.5, D: -2.25e-10, By: []byte{0, 1, 0xff}, S: "héllo \"q\"",
		E: "GREEN", Fx: [4]byte{1, 2, 3, 4}, A: []int32{1, 2, 3}, M: map[string]string{"k": "v"},
		U: map[string]any{"string": "x"}, U2: &allInner{X: 5},
		Dec: big.NewRat(-12345, 100), Decf: big.NewRat(1234567, 1000),
		Ts: ts, Tsu: time.Date(2026, 1, 2, 3, 4, 5, 678901e3, time.UTC), Lts: ts,
		Date: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), Tm: 3*time.Hour + 4*time.Minute + 5*time.Second + 678*time.Millisecond,
		UUID: "0b6e7c4e-55b4-4f0c-9a8e-1f2f3a4b5c6d", Def: "dflt", Defe: "GREEN",
	}
}

// refAPI is hamba/avro as the reference encoder. By default hamba writes
// array and map blocks with a negative count and their byte size; we write
// plain counts, as Java's and fastavro's encoders do (both are valid Avro),
// so the reference is told to write them that way too.
var refAPI = avro.Config{DisableBlockSizeHeader: true}.Freeze()

// TestAvroAgainstHamba: what hamba/avro encodes from Go values decodes to
// the documented JSON, and that JSON encodes back to hamba's bytes exactly.
func TestAvroAgainstHamba(t *testing.T) {
	s, err := compileAvro(allTypes, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := refAPI.Marshal(avro.MustParse(allTypes), allValue())
	if err != nil {
		t.Fatal(err)
	}
	js, err := s.decode(nil, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(js) {
		t.Fatalf("not JSON: %s", js)
	}
	if string(js) != allJSON {
		t.Fatalf("decoded\n got %s\nwant %s", js, allJSON)
	}
	enc, err := s.encode(nil, js)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, ref) {
		t.Fatalf("re-encoded bytes differ from hamba's\n got %x\nwant %x", enc, ref)
	}
	// Defaults: the fields with one may be missing; the same bytes result.
	missing := strings.Replace(strings.Replace(strings.Replace(allJSON, `,"def":"dflt"`, "", 1), `,"defu":null`, "", 1), `,"defe":"GREEN"`, "", 1)
	if enc2, err := s.encode(nil, []byte(missing)); err != nil || !bytes.Equal(enc2, ref) {
		t.Fatalf("defaults: %v\n got %x\nwant %x", err, enc2, ref)
	}
	// Member order and whitespace do not matter.
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(allJSON))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	sorted, _ := json.MarshalIndent(m, "", "  ")
	if enc3, err := s.encode(nil, sorted); err != nil || !bytes.Equal(enc3, ref) {
		t.Fatalf("reordered: %v", err)
	}
}

func TestAvroUnions(t *testing.T) {
	const sch = `{"type":"record","name":"U","fields":[{"name":"v","type":["null","int","long","double","string",
		{"type":"enum","name":"E","symbols":["A"]},{"type":"record","name":"R","fields":[{"name":"x","type":"int"}]},
		{"type":"map","values":"int"},{"type":"array","items":"string"},"boolean",{"type":"long","logicalType":"timestamp-millis"}]}]}`
	s, err := compileAvro(sch, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		in     string
		branch byte // the union index (zigzag: 2*i)
		out    string
	}{
		{`null`, 0, `null`},
		{`5`, 1, `5`},
		{`5000000000`, 2, `5000000000`},
		{`5.5`, 3, `5.5`},
		{`"A"`, 4, `"A"`}, // a string beats an enum symbol: string comes first
		{`"hi"`, 4, `"hi"`},
		{`{"x":1}`, 6, `{"x":1}`},
		{`{"y":1}`, 7, `{"y":1}`},
		{`["a"]`, 8, `["a"]`},
		{`true`, 9, `true`},
		{`{"E":"A"}`, 5, `"A"`},         // explicit branch by name
		{`{"long":3}`, 2, `3`},          // explicit primitive branch
		{`{"R":{"x":2}}`, 6, `{"x":2}`}, // explicit record
		{`{"double":3}`, 3, `3`},        // explicit double from an integral number
	} {
		in := []byte(`{"v":` + tt.in + `}`)
		enc, err := s.encode(nil, in)
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if enc[0] != tt.branch*2 {
			t.Errorf("%s: branch %d, want %d", tt.in, enc[0]/2, tt.branch)
		}
		js, err := s.decode(nil, enc)
		if err != nil || string(js) != `{"v":`+tt.out+`}` {
			t.Errorf("%s: decoded %s, %v", tt.in, js, err)
		}
	}
	if _, err := s.encode(nil, []byte(`{"v":[1]}`)); err == nil || !strings.Contains(err.Error(), "want string") {
		t.Errorf("array of int: %v", err)
	}
}

func TestAvroEncodeErrors(t *testing.T) {
	s, err := compileAvro(allTypes, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ old, new, want string }{
		{`"i":-7`, `"i":"x"`, `i: want int, got a string`},
		{`"i":-7`, `"i":3000000000`, `i: 3000000000 does not fit an int`},
		{`"i":-7`, `"i":1.5`, `i: want int, got 1.5`},
		{`"e":"GREEN"`, `"e":"BLUE"`, `e: "BLUE" is not a symbol of enum t.Color`},
		{`"fx":"AQIDBA=="`, `"fx":"AQID"`, `fx: fixed t.F4 holds 4 bytes, got 3`},
		{`"by":"AAH/"`, `"by":"**"`, `by: want bytes as base64`},
		{`"dec":"-123.45"`, `"dec":"1.234"`, `dec: decimal 1.234 has more than 2 fraction digits`},
		{`"ts":"2026-01-02T03:04:05.678Z"`, `"ts":"yesterday"`, `ts: timestamp "yesterday": want RFC 3339`},
		{`"s":"héllo \"q\"",`, ``, `field "s" of record t.All is missing (and has no default)`},
		{`"n":null,`, `"n":null,"zz":1,`, `field "zz" is not in record t.All`},
		{`"u2":{"x":5}`, `"u2":{"x":5,"y":1}`, `u2: want one of [null, t.Inner], got an object`},
		{`"b":true`, `"b":1`, `b: want boolean, got a number`},
	} {
		in := strings.Replace(allJSON, tt.old, tt.new, 1)
		if in == allJSON {
			t.Fatalf("edit %q did not apply", tt.old)
		}
		_, err := s.encode(nil, []byte(in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.new, err, tt.want)
		}
	}
	for _, in := range []string{``, `{`, `{"a":1} x`, `[1]`} {
		if _, err := s.encode(nil, []byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestAvroDecodeErrors(t *testing.T) {
	s, err := compileAvro(`{"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"u","type":["null","int"]},{"name":"a","type":{"type":"array","items":"long"}}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		in   []byte
		want string
	}{
		{[]byte{}, "unexpected end of data"},
		{[]byte{0x06, 'a'}, "unexpected end of data"},
		{[]byte{0x01}, "negative length"},
		{[]byte{0x02, 0xff}, "not UTF-8"},
		{[]byte{0x00, 0x06}, "union index 3 of 2"},
		{[]byte{0x00, 0x00, 0x00, 0x00}, "1 bytes left"},
		{[]byte{0x00, 0x00, 0xfe, 0xff, 0xff, 0xff, 0x0f}, "block of"},
	} {
		if _, err := s.decode(nil, tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%x: got %v, want %q", tt.in, err, tt.want)
		}
	}
}

// TestAvroReferences: a schema naming a type from a referenced schema.
func TestAvroReferences(t *testing.T) {
	addr := `{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"city","type":"string"}]}`
	order := `{"type":"record","name":"Order","namespace":"com.acme","fields":[{"name":"ship_to","type":"com.acme.Address"}]}`
	s, err := compileAvro(order, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := s.encode(nil, []byte(`{"ship_to":{"city":"Oslo"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if js, err := s.decode(nil, enc); err != nil || string(js) != `{"ship_to":{"city":"Oslo"}}` {
		t.Fatalf("%s %v", js, err)
	}
	if _, err := compileAvro(order, nil); err == nil {
		t.Fatal("a missing reference compiled")
	}
	// Two versions of one name in different compilations do not meet.
	v2 := strings.Replace(addr, `"type":"string"}`, `"type":"string"},{"name":"zip","type":"string","default":""}`, 1)
	if _, err := compileAvro(order, []string{v2}); err != nil {
		t.Fatal(err)
	}
	if js, err := s.decode(nil, enc); err != nil || string(js) != `{"ship_to":{"city":"Oslo"}}` {
		t.Fatalf("after v2: %s %v", js, err)
	}
}

// TestAvroRecursive: a linked list (a record that names itself).
func TestAvroRecursive(t *testing.T) {
	s, err := compileAvro(`{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := `{"v":1,"next":{"v":2,"next":null}}`
	enc, err := s.encode(nil, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if js, err := s.decode(nil, enc); err != nil || string(js) != in {
		t.Fatalf("%s %v", js, err)
	}
	deep := strings.Repeat(`{"v":1,"next":`, 2000) + "null" + strings.Repeat("}", 2000)
	if _, err := s.encode(nil, []byte(deep)); err == nil || !strings.Contains(err.Error(), "too deep") {
		t.Fatalf("deep: %v", err)
	}
}

func TestDecimalBytes(t *testing.T) {
	nd := &avroNode{kind: aBytes, logical: lDecimal, scale: 2, name: "bytes"}
	for _, s := range []string{"0", "0.01", "-0.01", "1.28", "-1.28", "-1.29", "327.67", "-327.68", "123456789012345678901234567890.12"} {
		b, err := decimalBytes(nd, []byte(`"`+s+`"`), -1)
		if err != nil {
			t.Fatal(s, err)
		}
		out, err := appendDecimal(nil, b, 2)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := new(big.Rat).SetString(s)
		got, _ := new(big.Rat).SetString(strings.Trim(string(out), `"`))
		if want.Cmp(got) != 0 {
			t.Errorf("%s -> %x -> %s", s, b, out)
		}
		ref, err := avro.Marshal(avro.MustParse(`{"type":"bytes","logicalType":"decimal","precision":40,"scale":2}`), want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ref[1:], b) && new(big.Int).SetBytes(ref[1:]).Cmp(new(big.Int).SetBytes(b)) != 0 {
			t.Errorf("%s: ours %x, hamba %x", s, b, ref[1:])
		}
	}
}
