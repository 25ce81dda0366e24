package fastschema

import (
	"bytes"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemas cover every supported keyword, in draft 2020-12 and draft 7.
var schemas = []string{
	// 0: the orders v1 schema of examples/fluid
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
	  "required":["order_id","customer_id","amount_cents","currency"],"additionalProperties":false,
	  "properties":{"order_id":{"type":"string"},"customer_id":{"type":"string"},
	    "amount_cents":{"type":"integer"},"currency":{"type":"string"}}}`,
	// 1: nested objects, $ref to $defs, enum, additionalProperties schema
	`{"type":"object","required":["id","total"],"additionalProperties":{"type":["string","null"]},
	  "properties":{"id":{"type":"integer"},"total":{"$ref":"#/$defs/money"},"status":{"enum":["new","paid",true,null,3]}},
	  "$defs":{"money":{"type":"object","required":["amount","currency"],"additionalProperties":false,
	    "properties":{"amount":{"type":"number"},"currency":{"const":"EUR"}}}}}`,
	// 2: arrays, strings, numbers with bounds
	`{"type":"array","minItems":1,"maxItems":3,"items":{"anyOf":[
	    {"type":"string","minLength":2,"maxLength":4},
	    {"type":"number","minimum":-1.5,"exclusiveMaximum":100,"multipleOf":0.5},
	    {"type":"integer","exclusiveMinimum":1000,"maximum":2000}]}}`,
	// 3: allOf, boolean schemas, recursion through properties
	`{"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"},"v":true,"never":false}}},
	  "allOf":[{"$ref":"#/$defs/node"},{"required":["v"]}]}`,
	// 4: draft 7: siblings of $ref other than type/enum/const are ignored; items
	`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},
	  "type":"object","properties":{"a":{"$ref":"#/definitions/s","maxLength":1},"b":{"type":"array","items":{"type":"boolean"}}},
	  "required":["a"]}`,
	// 5: no constraints at all
	`true`,
	// 6: false
	`false`,
	// 7: const object (undecided for objects), type null/boolean
	`{"properties":{"c":{"const":{"a":1}},"n":{"type":"null"},"b":{"type":"boolean","const":false}}}`,
}

type tc struct {
	schema int
	doc    string
	fast   bool // the fast path must decide it valid
}

var cases = []tc{
	{0, `{"order_id":"o-1","customer_id":"c-1","amount_cents":1250,"currency":"EUR"}`, true},
	{0, ` {"order_id":"o-1", "customer_id" : "c-1","amount_cents":-7,"currency":"EUR"}` + "\n\t", true},
	{0, `{"order_id":"o-\u00e9","customer_id":"c-1","amount_cents":0,"currency":"EUR"}`, true}, // escapes in an unchecked string
	{0, `{"order_id":"ö","customer_id":"c","amount_cents":1,"currency":"€"}`, true},
	{0, `{"order_id":"o","customer_id":"c","amount_cents":1,"currency":"EUR","order_id":"p"}`, true}, // duplicate key
	{0, `{"order_id":"o","customer_id":"c","amount_cents":1.0,"currency":"EUR"}`, false},             // integer as 1.0: library decides
	{0, `{"order_id":"o","customer_id":"c","amount_cents":1e2,"currency":"EUR"}`, false},
	{0, `{"order_id":"o","customer_id":"c","amount_cents":1.5,"currency":"EUR"}`, false},
	{0, `{"order_id":"o","customer_id":"c","amount_cents":1}`, false},
	{0, `{"order_id":"o","customer_id":"c","amount_cents":1,"currency":"EUR","x":1}`, false},
	{0, `{"order_id":1,"customer_id":"c","amount_cents":1,"currency":"EUR"}`, false},
	{0, `{"order_id":"o","customer_id":"c","amount_cents":01,"currency":"EUR"}`, false},
	{0, `{"order_id":"o","customer_id":"c","amount_cents":1,"currency":"EUR"} x`, false},
	{0, `{"order_id":"o","customer_id":"c","amount_cents":1,"currency":"EUR",}`, false},
	{0, `{"order_id":"o` + "\x01" + `","customer_id":"c","amount_cents":1,"currency":"EUR"}`, false},
	{0, `{"order_\u0069d":"o","customer_id":"c","amount_cents":1,"currency":"EUR"}`, false}, // escaped key: undecided
	{0, `{"order_id":"o","customer_id":"c","amount_cents":-,"currency":"EUR"}`, false},
	{0, `{"order_id":"o","customer_id":"c","amount_cents":1,"currency":"\x"}`, false},
	{0, `[]`, false},
	{0, ``, false},
	{1, `{"id":1,"total":{"amount":1.25,"currency":"EUR"}}`, true},
	{1, `{"id":1,"total":{"amount":1e3,"currency":"EUR"},"status":"paid","note":null,"x":"y"}`, true},
	{1, `{"id":1,"total":{"amount":1,"currency":"EUR"},"status":true}`, true},
	{1, `{"id":1,"total":{"amount":1,"currency":"EUR"},"status":null}`, true},
	{1, `{"id":1,"total":{"amount":1,"currency":"EUR"},"status":3}`, false}, // number in enum: undecided
	{1, `{"id":1,"total":{"amount":1,"currency":"EUR"},"status":false}`, false},
	{1, `{"id":1,"total":{"amount":1,"currency":"USD"}}`, false},
	{1, `{"id":1,"total":{"amount":1,"currency":"E\u0055R"}}`, false}, // escaped const: undecided
	{1, `{"id":1,"total":{"amount":"1","currency":"EUR"}}`, false},
	{1, `{"id":1,"total":{"amount":1,"currency":"EUR"},"x":1}`, false},
	{1, `{"id":1,"total":{"amount":1,"currency":"EUR","y":1}}`, false},
	{1, `{"id":1}`, false},
	{2, `["ab",-1.5,1500]`, true},
	{2, `["abcd"]`, true},
	{2, `["ééé"]`, true},
	{2, `[99.5]`, true},
	{2, `[]`, false},
	{2, `["a"]`, false},
	{2, `["abcde"]`, false},
	{2, `[100]`, false},
	{2, `[1.25]`, false},
	{2, `[1001]`, true},
	{2, `[1000]`, false},
	{2, `[1,2,3,4]`, false},
	{2, `[-2]`, false},
	{2, `[2001]`, false},
	{2, `[1e1]`, false}, // exponent with bounds: undecided
	{3, `{"v":1,"next":{"next":{"v":[1,{"a":null}]}}}`, true},
	{3, `{"v":1,"next":{"never":1}}`, false},
	{3, `{"next":{}}`, false},
	{3, `{"v":1,"next":2}`, false},
	{4, `{"a":"long","b":[true,false]}`, true},
	{4, `{"a":"x","b":[1]}`, false},
	{4, `{"a":1}`, false},
	{4, `{"b":[]}`, false},
	{5, `{"any":[1,"x",null,true,false,{"a":{}},[]],"n":-0.5e-3}`, true},
	{5, `{"a":[1,]}`, false},
	{5, `{"a" 1}`, false},
	{5, `nul`, false},
	{5, `"\uZZZZ"`, false},
	{5, `[1 2]`, false},
	{5, strings.Repeat("[", 600) + strings.Repeat("]", 600), false}, // deeper than maxDepth: undecided
	{5, "{\"ключ\":\"значение\",\"k\":\"\xfe\"}", true},             // invalid UTF-8 nobody looks at
	{5, "{\"\xff\":1}", true},
	{1, "{\"id\":1,\"total\":{\"amount\":1,\"currency\":\"EUR\xff\"}}", false},
	{0, "{\"order_id\":\"o\",\"customer_id\":\"c\",\"amount_cents\":1,\"currency\":\"EUR\",\"\xff\":1}", false},
	{1, "{\"id\":1,\"total\":{\"amount\":1,\"currency\":\"EUR\"},\"\xffstatus\":\"x\"}", false}, // invalid key: undecided
	{2, "[\"\xff\xfe\"]", false},
	{6, `{}`, false},
	{7, `{"n":null,"b":false,"c":{"a":1}}`, false}, // const object: undecided
	{7, `{"n":null,"b":false,"x":1}`, true},
	{7, `{"c":{"a":1}}`, false}, // const object: undecided
	{7, `{"b":true}`, false},
	{7, `{"n":0}`, false},
}

func compile(t testing.TB, i int) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schemas[i]))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	url := "http://example.test/s" + string(rune('0'+i)) + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func libValid(s *jsonschema.Schema, doc []byte) bool {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	return err == nil && s.Validate(v) == nil
}

// TestAgreesWithLibrary: whenever the fast path says valid, the library
// agrees; and the listed documents are decided by the fast path.
func TestAgreesWithLibrary(t *testing.T) {
	var compiled [len8]*jsonschema.Schema
	var fast [len8]*Validator
	for i := range schemas {
		compiled[i] = compile(t, i)
		if fast[i] = Compile(compiled[i]); fast[i] == nil {
			t.Fatalf("schema %d: not supported", i)
		}
	}
	for _, c := range cases {
		got := fast[c.schema].Valid([]byte(c.doc))
		lib := libValid(compiled[c.schema], []byte(c.doc))
		if got && !lib {
			t.Errorf("schema %d, %.80s: fast path valid, library invalid", c.schema, c.doc)
		}
		if got != c.fast {
			t.Errorf("schema %d, %.80s: fast path %v, want %v (library: %v)", c.schema, c.doc, got, c.fast, lib)
		}
	}
}

const len8 = 8

func TestUnsupported(t *testing.T) {
	for _, s := range []string{
		`{"type":"string","pattern":"^a"}`,
		`{"oneOf":[{"type":"string"},{"type":"integer"}]}`,
		`{"not":{"type":"string"}}`,
		`{"if":{"type":"string"},"then":{"minLength":1}}`,
		`{"properties":{"a":{"patternProperties":{"^x":{}}}}}`,
		`{"unevaluatedProperties":false}`,
		`{"type":"array","uniqueItems":true}`,
		`{"type":"array","prefixItems":[{"type":"string"}]}`,
		`{"type":"array","contains":{"type":"string"}}`,
		`{"minProperties":1}`,
		`{"propertyNames":{"maxLength":3}}`,
		`{"dependentRequired":{"a":["b"]}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}]}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, // cycle at one instance
		`{"$ref":"#"}`,
	} {
		schemas = append(schemas, s)
		sch := compile(t, len(schemas)-1)
		schemas = schemas[:len(schemas)-1]
		if Compile(sch) != nil {
			t.Errorf("%s: compiled, want unsupported", s)
		}
	}
}

// FuzzValid checks, for documents the fuzzer makes up, that the fast path
// never calls valid what the library (encoding/json + the validator)
// rejects.
func FuzzValid(f *testing.F) {
	for _, c := range cases {
		f.Add(uint8(c.schema), []byte(c.doc))
	}
	var compiled [len8]*jsonschema.Schema
	var fast [len8]*Validator
	for i := range schemas {
		compiled[i] = compile(f, i)
		fast[i] = Compile(compiled[i])
	}
	f.Fuzz(func(t *testing.T, i uint8, doc []byte) {
		i %= len8
		if fast[i].Valid(doc) && !libValid(compiled[i], doc) {
			t.Fatalf("schema %d, %q: fast path valid, library invalid", i, doc)
		}
	})
}
