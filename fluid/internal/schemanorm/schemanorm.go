// Package schemanorm puts a JSON Schema document in a canonical form so that
// two schemas that validate the same way compare equal byte for byte.
//
// Normalisation parses the document, drops annotation-only keywords
// ($comment, title, description, examples) wherever a schema object stands
// (never inside enum, const, default or a properties map, where such names
// are data), and re-encodes it with sorted object keys, no insignificant
// whitespace and numbers in canonical form (1.0 and 1 are the same number).
package schemanorm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// annotations are keywords that never affect validation.
var annotations = map[string]bool{
	"$comment":    true,
	"title":       true,
	"description": true,
	"examples":    true,
}

// Keywords whose value is a schema, an array of schemas, or a map of
// name -> schema. Everything else is left as data.
var (
	schemaKw = map[string]bool{
		"additionalProperties": true, "additionalItems": true, "not": true,
		"if": true, "then": true, "else": true, "contains": true,
		"propertyNames": true, "unevaluatedItems": true,
		"unevaluatedProperties": true, "contentSchema": true,
	}
	schemaOrArrayKw = map[string]bool{
		"items": true, "prefixItems": true, "allOf": true, "anyOf": true, "oneOf": true,
	}
	schemaMapKw = map[string]bool{
		"properties": true, "patternProperties": true, "$defs": true,
		"definitions": true, "dependentSchemas": true, "dependencies": true,
	}
)

// Normalize returns the canonical form of the JSON Schema document doc.
func Normalize(doc []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	if d.More() {
		return nil, fmt.Errorf("schema has data after the JSON document")
	}
	var buf bytes.Buffer
	if err := encode(&buf, schema(v)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// schema strips annotations from v where v stands as a schema.
func schema(v any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v // true/false schemas
	}
	out := make(map[string]any, len(obj))
	for k, val := range obj {
		switch {
		case annotations[k]:
			continue
		case schemaKw[k]:
			out[k] = schema(val)
		case schemaOrArrayKw[k]:
			if arr, ok := val.([]any); ok {
				a := make([]any, len(arr))
				for i, e := range arr {
					a[i] = schema(e)
				}
				out[k] = a
			} else {
				out[k] = schema(val)
			}
		case schemaMapKw[k]:
			if m, ok := val.(map[string]any); ok {
				mm := make(map[string]any, len(m))
				for name, s := range m {
					if _, isArr := s.([]any); isArr { // draft-4 dependencies: array of names
						mm[name] = s
						continue
					}
					mm[name] = schema(s)
				}
				out[k] = mm
			} else {
				out[k] = val
			}
		default:
			out[k] = val
		}
	}
	return out
}

func encode(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case string:
		b, _ := json.Marshal(x)
		buf.Write(b)
	case json.Number:
		if hugeExponent(string(x)) {
			buf.WriteString(string(x)) // not worth canonicalising; avoid huge big.Rat
			return nil
		}
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return fmt.Errorf("bad number %q", x)
		}
		if r.IsInt() {
			buf.WriteString(r.Num().String())
		} else {
			f, _ := r.Float64()
			buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encode(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			b, _ := json.Marshal(k)
			buf.Write(b)
			buf.WriteByte(':')
			if err := encode(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("unexpected JSON value %T", v)
	}
	return nil
}

// hugeExponent reports whether n has an exponent too large to expand cheaply.
func hugeExponent(n string) bool {
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return false
	}
	e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	return err != nil || e > 400 || e < -400
}
