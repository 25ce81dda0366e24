// Package fastschema answers "is this JSON document certainly valid against
// this compiled JSON Schema?" in one pass over the bytes, without decoding
// the document, for schemas that use a common subset of keywords.
//
// It is a fast path in front of santhosh-tekuri/jsonschema/v6, never a
// replacement: Valid returning true means the library would accept the
// document (it is JSON encoding/json decodes, and the library's validator
// finds no error); false means invalid OR undecided (an object key with
// escapes or invalid UTF-8 where properties/required/additionalProperties
// look at keys, a string with escapes or invalid UTF-8 whose content a
// keyword needs, an integer written with a fraction or exponent, a number
// in exponent form under numeric bounds, an enum or const value that is a
// number, object or array, nesting deeper than 512), and the caller must ask the
// library, which then gives the answer and the error. The fast path is
// therefore only ever trusted when it says "valid", and every keyword it
// supports is checked monotonically (a keyword it cannot decide makes the
// whole answer false).
//
// Compile returns nil for a schema that reaches (through $ref, allOf,
// anyOf, properties, items...) any keyword outside the subset:
//
//	type, enum, const, $ref (draft 4-7 semantics: siblings other than
//	type/enum/const ignored, as the library does), allOf, anyOf,
//	properties, required, additionalProperties, items (one schema, any
//	draft), minItems, maxItems, minLength, maxLength, minimum, maximum,
//	exclusiveMinimum, exclusiveMaximum, multipleOf; boolean schemas;
//	annotations (title, description, default, examples, ...) are ignored.
//
// and for a schema whose $ref/allOf/anyOf edges form a cycle at one
// instance location (the library reports those as errors).
package fastschema

import (
	"bytes"
	"math/big"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/streamd/streamd/internal/x/jsonscan"
)

// maxDepth bounds nesting; deeper documents are undecided.
const maxDepth = 512

// Validator is a compiled fast path for one schema.
type Validator struct {
	root *node
}

type typeMask uint8

const (
	tNull typeMask = 1 << iota
	tBool
	tNumber  // any number
	tInteger // integral numbers only (when tNumber is not set)
	tString
	tArray
	tObject
	tAll = tNull | tBool | tNumber | tInteger | tString | tArray | tObject
)

type node struct {
	never bool     // false schema
	types typeMask // allowed types (tAll when "type" is absent)

	hasEnum bool
	enum    []any // string, bool, nil members; numbers/objects/arrays make the value undecided

	ref      *node
	refOnly  bool // draft < 2019 with $ref: only type/enum/const and the ref apply
	allOf    []*node
	anyOf    []*node
	checkObj bool
	props    map[string]prop
	nreq     int
	addl     int8 // 0: any, 1: none (false), 2: schema
	addlNode *node

	items              *node
	minItems, maxItems int // -1: none

	minLen, maxLen int // -1: none

	numBounds                        bool
	min, max, exMin, exMax, multiple *big.Rat
}

type prop struct {
	n   *node // nil: not in properties (only required)
	req int   // index in required, -1 if not required
}

// Compile builds the fast path for s, or returns nil when s uses a keyword
// outside the supported subset.
func Compile(s *jsonschema.Schema) *Validator {
	c := compiler{nodes: map[*jsonschema.Schema]*node{}, state: map[*node]int8{}}
	n := c.compile(s)
	if n == nil || c.bad {
		return nil
	}
	for _, n := range c.nodes {
		if c.cyclic(n) {
			return nil
		}
	}
	return &Validator{root: n}
}

type compiler struct {
	nodes map[*jsonschema.Schema]*node
	state map[*node]int8 // cycle search: 1 on stack, 2 done
	bad   bool
}

// cyclic reports a cycle of same-instance edges ($ref, allOf, anyOf)
// through n.
func (c *compiler) cyclic(n *node) bool {
	switch c.state[n] {
	case 1:
		return true
	case 2:
		return false
	}
	c.state[n] = 1
	if n.ref != nil && c.cyclic(n.ref) {
		return true
	}
	for _, m := range n.allOf {
		if c.cyclic(m) {
			return true
		}
	}
	for _, m := range n.anyOf {
		if c.cyclic(m) {
			return true
		}
	}
	c.state[n] = 2
	return false
}

func (c *compiler) compile(s *jsonschema.Schema) *node {
	if s == nil {
		c.bad = true
		return nil
	}
	if n, ok := c.nodes[s]; ok {
		return n
	}
	n := &node{types: tAll, minItems: -1, maxItems: -1, minLen: -1, maxLen: -1}
	c.nodes[s] = n
	if s.Bool != nil {
		n.never = !*s.Bool
		return n
	}
	if s.RecursiveRef != nil || s.DynamicRef != nil || s.Format != nil ||
		s.Not != nil || len(s.OneOf) > 0 || s.If != nil || s.Then != nil || s.Else != nil ||
		s.MaxProperties != nil || s.MinProperties != nil || s.PropertyNames != nil ||
		len(s.PatternProperties) > 0 || len(s.Dependencies) > 0 || len(s.DependentRequired) > 0 ||
		len(s.DependentSchemas) > 0 || s.UnevaluatedProperties != nil ||
		s.UniqueItems || s.Contains != nil || s.MinContains != nil || s.MaxContains != nil ||
		s.AdditionalItems != nil || len(s.PrefixItems) > 0 || s.UnevaluatedItems != nil ||
		s.Pattern != nil || s.ContentEncoding != nil || s.ContentMediaType != nil || s.ContentSchema != nil ||
		len(s.Extensions) > 0 {
		c.bad = true
		return nil
	}
	if s.Types != nil && !s.Types.IsEmpty() {
		n.types = 0
		for _, t := range s.Types.ToStrings() {
			switch t {
			case "null":
				n.types |= tNull
			case "boolean":
				n.types |= tBool
			case "number":
				n.types |= tNumber
			case "integer":
				n.types |= tInteger
			case "string":
				n.types |= tString
			case "array":
				n.types |= tArray
			case "object":
				n.types |= tObject
			default:
				c.bad = true
				return nil
			}
		}
	}
	if s.Enum != nil {
		n.hasEnum = true
		n.enum = s.Enum.Values
	}
	if s.Const != nil {
		if n.hasEnum {
			c.bad = true // both: not worth the code
			return nil
		}
		n.hasEnum = true
		n.enum = []any{*s.Const}
	}
	if s.Ref != nil {
		n.ref = c.compile(s.Ref)
		if s.DraftVersion < 2019 {
			// The library checks type, const, enum and format, then the
			// $ref, and ignores every other keyword.
			n.refOnly = true
			return n
		}
	}
	for _, a := range s.AllOf {
		n.allOf = append(n.allOf, c.compile(a))
	}
	for _, a := range s.AnyOf {
		n.anyOf = append(n.anyOf, c.compile(a))
	}

	// object
	if len(s.Properties) > 0 || len(s.Required) > 0 || s.AdditionalProperties != nil {
		n.checkObj = true
		n.props = make(map[string]prop, len(s.Properties)+len(s.Required))
		for name, ps := range s.Properties {
			n.props[name] = prop{n: c.compile(ps), req: -1}
		}
		seen := map[string]bool{}
		for _, name := range s.Required {
			if seen[name] {
				continue
			}
			seen[name] = true
			p := n.props[name]
			p.req = n.nreq
			n.nreq++
			n.props[name] = p
		}
		if n.nreq > 64 {
			c.bad = true
			return nil
		}
		switch a := s.AdditionalProperties.(type) {
		case nil:
		case bool:
			if !a {
				n.addl = 1
			}
		case *jsonschema.Schema:
			n.addl = 2
			n.addlNode = c.compile(a)
		default:
			c.bad = true
			return nil
		}
	}

	// array
	if s.DraftVersion < 2020 {
		switch it := s.Items.(type) {
		case nil:
		case *jsonschema.Schema:
			n.items = c.compile(it)
		default: // []*Schema (tuple form)
			c.bad = true
			return nil
		}
	} else {
		if s.Items != nil {
			c.bad = true
			return nil
		}
		if s.Items2020 != nil {
			n.items = c.compile(s.Items2020)
		}
	}
	if s.MinItems != nil {
		n.minItems = *s.MinItems
	}
	if s.MaxItems != nil {
		n.maxItems = *s.MaxItems
	}

	// string
	if s.MinLength != nil {
		n.minLen = *s.MinLength
	}
	if s.MaxLength != nil {
		n.maxLen = *s.MaxLength
	}

	// number
	n.min, n.max, n.exMin, n.exMax, n.multiple = s.Minimum, s.Maximum, s.ExclusiveMinimum, s.ExclusiveMaximum, s.MultipleOf
	n.numBounds = n.min != nil || n.max != nil || n.exMin != nil || n.exMax != nil || n.multiple != nil
	if n.multiple != nil && n.multiple.Sign() == 0 {
		c.bad = true
		return nil
	}
	return n
}

// Valid reports whether doc is certainly a JSON document valid against the
// schema; false means invalid or undecided (ask the library).
func (v *Validator) Valid(doc []byte) bool {
	w := walker{b: doc}
	w.ws()
	if !w.value(v.root, 0) {
		return false
	}
	w.ws()
	return w.i == len(w.b)
}

type walker struct {
	b []byte
	i int
}

func (w *walker) ws() { w.i = jsonscan.SkipWS(w.b, w.i) }

// value checks the value at w.i against n and moves past it; false means
// invalid, malformed or undecided (w.i is then meaningless).
func (w *walker) value(n *node, depth int) bool {
	if n.never || depth > maxDepth || w.i >= len(w.b) {
		return false
	}
	start := w.i
	// Same-instance subschemas walk the value on their own.
	if n.ref != nil {
		if !w.value(n.ref, depth) {
			return false
		}
		w.i = start
	}
	for _, m := range n.allOf {
		if !w.value(m, depth) {
			return false
		}
		w.i = start
	}
	if len(n.anyOf) > 0 {
		ok := false
		for _, m := range n.anyOf {
			ok = w.value(m, depth)
			w.i = start
			if ok {
				break
			}
		}
		if !ok {
			return false
		}
	}
	switch c := w.b[w.i]; {
	case c == '{':
		if n.types&tObject == 0 || n.hasEnum {
			return false
		}
		return w.object(n, depth)
	case c == '[':
		if n.types&tArray == 0 || n.hasEnum {
			return false
		}
		return w.array(n, depth)
	case c == '"':
		if n.types&tString == 0 {
			return false
		}
		return w.str(n)
	case c == 't':
		return n.types&tBool != 0 && w.lit("true") && n.enumHas(true)
	case c == 'f':
		return n.types&tBool != 0 && w.lit("false") && n.enumHas(false)
	case c == 'n':
		return n.types&tNull != 0 && w.lit("null") && n.enumHas(nil)
	case c == '-' || c >= '0' && c <= '9':
		if n.types&(tNumber|tInteger) == 0 || n.hasEnum {
			return false
		}
		return w.number(n)
	}
	return false
}

func (w *walker) lit(s string) bool {
	if !bytes.HasPrefix(w.b[w.i:], []byte(s)) {
		return false
	}
	w.i += len(s)
	return true
}

// enumHas is the enum (or const) check of true, false and null.
func (n *node) enumHas(v any) bool {
	if !n.hasEnum {
		return true
	}
	for _, e := range n.enum {
		switch e.(type) {
		case bool, nil:
			if e == v {
				return true
			}
		}
	}
	return false
}

func (w *walker) object(n *node, depth int) bool {
	w.i++ // {
	var seen uint64
	w.ws()
	if w.i < len(w.b) && w.b[w.i] == '}' {
		w.i++
		return !n.refOnly && n.nreq == 0 || n.refOnly
	}
	for {
		if w.i >= len(w.b) || w.b[w.i] != '"' {
			return false
		}
		checkKeys := n.checkObj && !n.refOnly
		key, plain, ok := w.scanString()
		if !ok || checkKeys && !plain {
			return false // malformed; or escaped or invalid UTF-8 key that matters: undecided
		}
		w.ws()
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			return false
		}
		w.i++
		w.ws()
		var sub *node
		if checkKeys {
			p, ok := n.props[string(key)]
			if ok && p.req >= 0 {
				seen |= 1 << uint(p.req)
			}
			switch {
			case ok && p.n != nil:
				sub = p.n
			case n.addl == 1:
				return false
			case n.addl == 2:
				sub = n.addlNode
			}
		}
		if sub != nil {
			if !w.value(sub, depth+1) {
				return false
			}
		} else if !w.skip(depth + 1) {
			return false
		}
		w.ws()
		if w.i >= len(w.b) {
			return false
		}
		switch w.b[w.i] {
		case ',':
			w.i++
			w.ws()
		case '}':
			w.i++
			return n.refOnly || seen == (uint64(1)<<uint(n.nreq))-1
		default:
			return false
		}
	}
}

func (w *walker) array(n *node, depth int) bool {
	w.i++ // [
	count := 0
	items := n.items
	if n.refOnly {
		items = nil
	}
	w.ws()
	if w.i < len(w.b) && w.b[w.i] == ']' {
		w.i++
		return n.refOnly || n.minItems <= 0
	}
	for {
		count++
		if items != nil {
			if !w.value(items, depth+1) {
				return false
			}
		} else if !w.skip(depth + 1) {
			return false
		}
		w.ws()
		if w.i >= len(w.b) {
			return false
		}
		switch w.b[w.i] {
		case ',':
			w.i++
			w.ws()
		case ']':
			w.i++
			if n.refOnly {
				return true
			}
			return (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
		default:
			return false
		}
	}
}

func (w *walker) str(n *node) bool {
	s, plain, ok := w.scanString()
	if !ok {
		return false
	}
	needLen := !n.refOnly && (n.minLen >= 0 || n.maxLen >= 0)
	if !n.hasEnum && !needLen {
		return true
	}
	if !plain {
		return false // the decoded content differs from the bytes: undecided
	}
	if needLen {
		l := utf8.RuneCount(s)
		if n.minLen >= 0 && l < n.minLen || n.maxLen >= 0 && l > n.maxLen {
			return false
		}
	}
	if n.hasEnum {
		for _, e := range n.enum {
			if es, ok := e.(string); ok && es == string(s) {
				return true
			}
		}
		return false
	}
	return true
}

// scanString moves past the string at w.i and returns its contents;
// plain means they need no decoding (no escapes, valid UTF-8).
func (w *walker) scanString() (raw []byte, plain, ok bool) {
	end := jsonscan.String(w.b, w.i)
	if end < 0 {
		return nil, false, false
	}
	raw = w.b[w.i+1 : end-1]
	w.i = end
	ascii := true
	for _, c := range raw {
		if c == '\\' {
			return raw, false, true
		}
		if c >= 0x80 {
			ascii = false
		}
	}
	return raw, ascii || utf8.Valid(raw), true
}

// scanNumber moves past the JSON number at w.i and returns its text and
// whether it is written as an integer (no fraction, no exponent).
func (w *walker) scanNumber() (lit []byte, integer, ok bool) {
	end := jsonscan.Number(w.b, w.i)
	if end < 0 {
		return nil, false, false
	}
	lit = w.b[w.i:end]
	w.i = end
	for _, c := range lit {
		if c == '.' || c == 'e' || c == 'E' {
			return lit, false, true
		}
	}
	return lit, true, true
}

func (w *walker) number(n *node) bool {
	lit, integer, ok := w.scanNumber()
	if !ok {
		return false
	}
	if n.types&tNumber == 0 && !integer {
		return false // "integer" only, written with a fraction or exponent: undecided
	}
	if n.refOnly || !n.numBounds {
		return true
	}
	if bytes.ContainsAny(lit, "eE") {
		return false // big.Rat of a huge exponent: leave it to the library
	}
	r, ok := new(big.Rat).SetString(string(lit))
	if !ok {
		return false
	}
	if n.min != nil && r.Cmp(n.min) < 0 || n.max != nil && r.Cmp(n.max) > 0 ||
		n.exMin != nil && r.Cmp(n.exMin) <= 0 || n.exMax != nil && r.Cmp(n.exMax) >= 0 {
		return false
	}
	if n.multiple != nil && !new(big.Rat).Quo(r, n.multiple).IsInt() {
		return false
	}
	return true
}

// skip moves past any well-formed value nested at most maxDepth deep.
func (w *walker) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	end := jsonscan.Value(w.b, w.i, maxDepth-depth)
	if end < 0 {
		return false
	}
	w.i = end
	return true
}
