package schema

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"

	"github.com/streamd/streamd/internal/x/jsonscan"
	"github.com/streamd/streamd/record"
)

// avroSchema is an Avro schema compiled for the JSON mapping of
// docs/schema-registry.md: hamba/avro parses and resolves the schema (names,
// namespaces, references, logical types); the walkers below go straight
// between Avro binary and JSON text, without a generic Go value between.
type avroSchema struct {
	root     *avroNode
	fullName string
}

type avroKind uint8

const (
	aNull avroKind = iota
	aBoolean
	aInt
	aLong
	aFloat
	aDouble
	aBytes
	aString
	aRecord
	aEnum
	aArray
	aMap
	aUnion
	aFixed
)

// The logical types the JSON mapping knows; others read as their base type.
const (
	lNone uint8 = iota
	lDecimal
	lDate
	lTimeMillis
	lTimeMicros
	lTimestampMillis
	lTimestampMicros
	lLocalTimestampMillis
	lLocalTimestampMicros
	lDuration
)

type avroNode struct {
	kind    avroKind
	logical uint8
	name    string // full name of a named type; the type name of others
	scale   int    // decimal
	size    int    // fixed
	fields  []avroField
	byName  map[string]int // field or symbol index
	symbols []string
	quoted  [][]byte  // symbols as JSON strings
	items   *avroNode // array items, map values
	union   []*avroNode
	nullIdx int // index of null in a union, or -1
	// fastOther is, in a union of null and one other type that
	// encodeUnionAt can pick without pickBranch, the other's index; else -1.
	fastOther int
	// slow turns encodeLeafAt off for this node (tests compare the fast
	// paths with encodeAvro).
	slow bool
}

type avroField struct {
	name string
	key  []byte // "name": as decode writes it
	// quoted is "name" when the name is plain ASCII (jsonscan.Plain), as
	// encodeRecordAt matches it; else nil.
	quoted string
	node   *avroNode
	// def is the field default as JSON, encoded against the field's type
	// (for a union, its first branch) when the field is missing; nil when
	// the field has none.
	def []byte
	// defBranch is the union branch the default is for.
	defBranch int
}

var logicalByName = map[avro.LogicalType]uint8{
	avro.Decimal: lDecimal, avro.Date: lDate, avro.TimeMillis: lTimeMillis, avro.TimeMicros: lTimeMicros,
	avro.TimestampMillis: lTimestampMillis, avro.TimestampMicros: lTimestampMicros,
	avro.LocalTimestampMillis: lLocalTimestampMillis, avro.LocalTimestampMicros: lLocalTimestampMicros,
	avro.Duration: lDuration,
}

// compileAvro parses text after refs (the texts of referenced schemas,
// dependencies first) into a fresh name cache, so that two versions of one
// named type never meet.
func compileAvro(text string, refs []string) (*avroSchema, error) {
	cache := &avro.SchemaCache{}
	for _, r := range refs {
		if _, err := avro.ParseWithCache(r, "", cache); err != nil {
			return nil, fmt.Errorf("referenced schema: %w", err)
		}
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, err
	}
	c := &avroCompiler{named: map[string]*avroNode{}}
	root, err := c.node(s)
	if err != nil {
		return nil, err
	}
	for _, u := range c.unions {
		u.fastOther = fastOther(u)
	}
	out := &avroSchema{root: root}
	if n, ok := s.(avro.NamedSchema); ok {
		out.fullName = n.FullName()
	}
	return out, nil
}

type avroCompiler struct {
	named  map[string]*avroNode
	unions []*avroNode // fastOther is set when every record is complete
}

func (c *avroCompiler) node(s avro.Schema) (*avroNode, error) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		if nd := c.named[n.FullName()]; nd != nil {
			return nd, nil
		}
	}
	nd := &avroNode{name: string(s.Type()), nullIdx: -1}
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		nd.logical = logicalByName[l.Logical().Type()]
		if d, ok := l.Logical().(*avro.DecimalLogicalSchema); ok {
			nd.scale = d.Scale()
		}
	}
	switch t := s.(type) {
	case *avro.NullSchema:
		nd.kind = aNull
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Null:
			nd.kind = aNull
		case avro.Boolean:
			nd.kind = aBoolean
		case avro.Int:
			nd.kind = aInt
		case avro.Long:
			nd.kind = aLong
		case avro.Float:
			nd.kind = aFloat
		case avro.Double:
			nd.kind = aDouble
		case avro.Bytes:
			nd.kind = aBytes
		case avro.String:
			nd.kind = aString
		default:
			return nil, fmt.Errorf("unsupported primitive type %s", t.Type())
		}
		// A logical type on the wrong base type is ignored, as the spec says.
		if !logicalFits(nd) {
			nd.logical = lNone
		}
	case *avro.RecordSchema:
		nd.kind, nd.name = aRecord, t.FullName()
		c.named[t.FullName()] = nd
		nd.byName = make(map[string]int, len(t.Fields()))
		for i, f := range t.Fields() {
			fn, err := c.node(f.Type())
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", t.FullName(), f.Name(), err)
			}
			af := avroField{name: f.Name(), node: fn, key: append(record.AppendJSONString(nil, f.Name()), ':')}
			if jsonscan.Plain([]byte(f.Name())) == len(f.Name()) {
				af.quoted = `"` + f.Name() + `"`
			}
			if f.HasDefault() {
				def, branch, err := defaultJSON(f, fn)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: default: %w", t.FullName(), f.Name(), err)
				}
				af.def, af.defBranch = def, branch
			}
			nd.fields = append(nd.fields, af)
			nd.byName[f.Name()] = i
		}
	case *avro.EnumSchema:
		nd.kind, nd.name = aEnum, t.FullName()
		c.named[t.FullName()] = nd
		nd.symbols = t.Symbols()
		nd.byName = make(map[string]int, len(nd.symbols))
		for i, s := range nd.symbols {
			nd.byName[s] = i
			nd.quoted = append(nd.quoted, record.AppendJSONString(nil, s))
		}
	case *avro.FixedSchema:
		nd.kind, nd.name, nd.size = aFixed, t.FullName(), t.Size()
		c.named[t.FullName()] = nd
		if nd.logical != lDecimal && nd.logical != lDuration {
			nd.logical = lNone
		}
		if nd.logical == lDuration && nd.size != 12 {
			nd.logical = lNone
		}
	case *avro.ArraySchema:
		return c.container(nd, aArray, t.Items())
	case *avro.MapSchema:
		return c.container(nd, aMap, t.Values())
	case *avro.UnionSchema:
		nd.kind = aUnion
		for i, b := range t.Types() {
			bn, err := c.node(b)
			if err != nil {
				return nil, err
			}
			if bn.kind == aNull {
				nd.nullIdx = i
			}
			nd.union = append(nd.union, bn)
		}
		c.unions = append(c.unions, nd)
	default:
		return nil, fmt.Errorf("unsupported schema type %s", s.Type())
	}
	return nd, nil
}

// container makes nd an array or map (kind) of items.
func (c *avroCompiler) container(nd *avroNode, kind avroKind, items avro.Schema) (*avroNode, error) {
	it, err := c.node(items)
	if err != nil {
		return nil, err
	}
	nd.kind, nd.items = kind, it
	return nd, nil
}

// fastOther returns the index of the type besides null in a union of two
// whose values encodeUnionAt can tell from the JSON alone, or -1. A record
// qualifies unless a field is named after a branch ({"null": ...} and
// {"Name": ...} with one member are pickBranch's explicit branch form).
func fastOther(nd *avroNode) int {
	if len(nd.union) != 2 || nd.nullIdx < 0 {
		return -1
	}
	i := 1 - nd.nullIdx
	o := nd.union[i]
	switch o.kind {
	case aString, aEnum, aBoolean, aInt, aLong, aDouble, aFloat, aArray:
		return i
	case aRecord:
		for _, f := range o.fields {
			if f.name == "null" || f.name == o.name {
				return -1
			}
		}
		return i
	}
	return -1
}

func logicalFits(nd *avroNode) bool {
	switch nd.logical {
	case lDate, lTimeMillis:
		return nd.kind == aInt
	case lTimeMicros, lTimestampMillis, lTimestampMicros, lLocalTimestampMillis, lLocalTimestampMicros:
		return nd.kind == aLong
	case lDecimal:
		return nd.kind == aBytes
	case lDuration:
		return false // fixed only
	}
	return true
}

// defaultJSON turns a field's default (parsed by hamba/avro into Go values)
// back into JSON in the mapping of the field's type. A union's default is
// for its first branch.
func defaultJSON(f *avro.Field, nd *avroNode) ([]byte, int, error) {
	v := f.Default()
	branch := 0
	target := nd
	if nd.kind == aUnion {
		target = nd.union[0]
	}
	if v == nil {
		if target.kind != aNull {
			return nil, 0, fmt.Errorf("null default for a %s", target.name)
		}
		return []byte("null"), branch, nil
	}
	// Avro's JSON defaults write bytes and fixed as ISO-8859-1 strings;
	// hamba gives them as []byte or string. Our mapping is base64.
	if target.kind == aBytes || target.kind == aFixed {
		var raw []byte
		switch x := v.(type) {
		case []byte:
			raw = x
		case string:
			for _, r := range x {
				raw = append(raw, byte(r))
			}
		}
		if target.logical == lDecimal || target.logical == lDuration {
			var out []byte
			var err error
			if target.logical == lDecimal {
				out, err = appendDecimal(nil, raw, target.scale)
			} else {
				out, err = appendDuration(nil, raw)
			}
			return out, branch, err
		}
		return strconv.AppendQuote(nil, base64.StdEncoding.EncodeToString(raw)), branch, nil
	}
	b, err := json.Marshal(v)
	return b, branch, err
}

// ---- decoding: Avro binary -> JSON

type avroReader struct {
	b   []byte
	pos int
}

var errShort = errors.New("unexpected end of data")

func (r *avroReader) long() (int64, error) {
	v, n := binary.Varint(r.b[r.pos:])
	if n <= 0 {
		if n == 0 {
			return 0, errShort
		}
		return 0, errors.New("varint overflows a long")
	}
	r.pos += n
	return v, nil
}

func (r *avroReader) take(n int64) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("negative length %d", n)
	}
	if n > int64(len(r.b)-r.pos) {
		return nil, errShort
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, nil
}

// bytes reads Avro bytes or a string: a long length, then that many bytes.
func (r *avroReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	return r.take(n)
}

// maxDepth bounds nesting (recursive schemas) while decoding and encoding.
const maxDepth = 1000

// decodeAvro appends the JSON form of the Avro binary data to dst.
func (s *avroSchema) decode(dst, data []byte) ([]byte, error) {
	r := &avroReader{b: data}
	dst, err := r.value(dst, s.root, 0)
	if err != nil {
		return nil, err
	}
	if r.pos != len(data) {
		return nil, fmt.Errorf("%d bytes left after the value", len(data)-r.pos)
	}
	return dst, nil
}

func (r *avroReader) value(dst []byte, nd *avroNode, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deep")
	}
	switch nd.kind {
	case aNull:
		return append(dst, "null"...), nil
	case aBoolean:
		b, err := r.take(1)
		if err != nil {
			return nil, err
		}
		switch b[0] {
		case 0:
			return append(dst, "false"...), nil
		case 1:
			return append(dst, "true"...), nil
		}
		return nil, fmt.Errorf("boolean byte 0x%02x", b[0])
	case aInt, aLong:
		v, err := r.long()
		if err != nil {
			return nil, err
		}
		if nd.kind == aInt && (v < math.MinInt32 || v > math.MaxInt32) {
			return nil, fmt.Errorf("int %d out of range", v)
		}
		return appendLogicalInt(dst, nd.logical, v), nil
	case aFloat:
		b, err := r.take(4)
		if err != nil {
			return nil, err
		}
		return appendFloat(dst, float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 32), nil
	case aDouble:
		b, err := r.take(8)
		if err != nil {
			return nil, err
		}
		return appendFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(b)), 64), nil
	case aBytes, aString:
		b, err := r.bytes()
		if err != nil {
			return nil, err
		}
		if nd.kind == aString {
			return appendString(dst, b)
		}
		if nd.logical == lDecimal {
			return appendDecimal(dst, b, nd.scale)
		}
		return appendBase64(dst, b), nil
	case aFixed:
		b, err := r.take(int64(nd.size))
		if err != nil {
			return nil, err
		}
		switch nd.logical {
		case lDecimal:
			return appendDecimal(dst, b, nd.scale)
		case lDuration:
			return appendDuration(dst, b)
		}
		return appendBase64(dst, b), nil
	case aEnum:
		i, err := r.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(nd.symbols)) {
			return nil, fmt.Errorf("enum %s: index %d of %d symbols", nd.name, i, len(nd.symbols))
		}
		return append(dst, nd.quoted[i]...), nil
	case aUnion:
		i, err := r.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(nd.union)) {
			return nil, fmt.Errorf("union index %d of %d branches", i, len(nd.union))
		}
		return r.value(dst, nd.union[i], depth+1)
	case aRecord:
		dst = append(dst, '{')
		for i := range nd.fields {
			f := &nd.fields[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, f.key...)
			if f.node.kind == aString && !f.node.slow {
				var ok bool
				if dst, ok = r.plainString(dst); ok {
					continue
				}
			}
			var err error
			if dst, err = r.value(dst, f.node, depth+1); err != nil {
				return nil, fmt.Errorf("%s: %w", f.name, err)
			}
		}
		return append(dst, '}'), nil
	case aArray, aMap:
		open, close := byte('['), byte(']')
		if nd.kind == aMap {
			open, close = '{', '}'
		}
		dst = append(dst, open)
		first := true
		for {
			n, err := r.long()
			if err != nil {
				return nil, err
			}
			if n == 0 {
				break
			}
			if n < 0 {
				if n == math.MinInt64 {
					return nil, errors.New("block count out of range")
				}
				n = -n
				if _, err := r.long(); err != nil { // block size in bytes
					return nil, err
				}
			}
			// Every item takes at least one byte unless it is null-like: a
			// count beyond what is left can only be a lie (or many nulls,
			// which we bound the same way).
			if n > int64(len(r.b)-r.pos)+1 && !zeroSize(nd.items) {
				return nil, fmt.Errorf("block of %d items in %d bytes", n, len(r.b)-r.pos)
			}
			if n > 1<<24 {
				return nil, fmt.Errorf("block of %d items", n)
			}
			for ; n > 0; n-- {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				if nd.kind == aMap {
					k, err := r.bytes()
					if err != nil {
						return nil, err
					}
					if !utf8.Valid(k) {
						return nil, errors.New("map key is not UTF-8")
					}
					dst = record.AppendJSONString(dst, k)
					dst = append(dst, ':')
				}
				if nd.items.kind == aString && !nd.items.slow {
					var ok bool
					if dst, ok = r.plainString(dst); ok {
						continue
					}
				}
				if dst, err = r.value(dst, nd.items, depth+1); err != nil {
					return nil, err
				}
			}
		}
		return append(dst, close), nil
	}
	return nil, fmt.Errorf("unknown node kind %d", nd.kind)
}

// plainString is value's fast path for a string of at most 63 bytes (a
// one-byte length) that is plain ASCII: it appends the string as JSON and
// reports true, or leaves r and dst alone and reports false (value then
// handles the string, and any error).
func (r *avroReader) plainString(dst []byte) ([]byte, bool) {
	p := r.pos
	if p >= len(r.b) {
		return dst, false
	}
	z := r.b[p]
	if z&0x81 != 0 { // a longer varint, or a negative length
		return dst, false
	}
	n := int(z >> 1)
	s := r.b[p+1:]
	if n > len(s) {
		return dst, false
	}
	s = s[:n]
	if jsonscan.Plain(s) != n {
		return dst, false
	}
	r.pos = p + 1 + n
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), true
}

// zeroSize reports whether a value of nd can take no bytes (null, an empty
// record, a zero-size fixed).
func zeroSize(nd *avroNode) bool {
	switch nd.kind {
	case aNull:
		return true
	case aFixed:
		return nd.size == 0
	case aRecord:
		for i := range nd.fields {
			if !zeroSize(nd.fields[i].node) {
				return false
			}
		}
		return true
	}
	return false
}

// appendString writes the Avro string b (which must be UTF-8) as a JSON
// string: as it is when it is plain ASCII, else escaped by
// record.AppendJSONString.
func appendString(dst, b []byte) ([]byte, error) {
	if jsonscan.Plain(b) == len(b) {
		dst = append(dst, '"')
		dst = append(dst, b...)
		return append(dst, '"'), nil
	}
	if !utf8.Valid(b) {
		return nil, errors.New("string is not UTF-8")
	}
	return record.AppendJSONString(dst, b), nil
}

func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendFloat writes a finite float as a JSON number and NaN and the
// infinities as the strings "NaN", "Infinity" and "-Infinity" (as protojson
// does).
func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

const (
	timestampMillisLayout = "2006-01-02T15:04:05.000Z07:00"
	timestampMicrosLayout = "2006-01-02T15:04:05.000000Z07:00"
	localMillisLayout     = "2006-01-02T15:04:05.000"
	localMicrosLayout     = "2006-01-02T15:04:05.000000"
)

func appendLogicalInt(dst []byte, logical uint8, v int64) []byte {
	switch logical {
	case lDate:
		return strconv.AppendQuote(dst, time.Unix(v*86400, 0).UTC().Format(time.DateOnly))
	case lTimeMillis:
		return appendTimeOfDay(dst, v*1000, 3)
	case lTimeMicros:
		return appendTimeOfDay(dst, v, 6)
	case lTimestampMillis, lLocalTimestampMillis:
		layout := timestampMillisLayout
		if logical == lLocalTimestampMillis {
			layout = localMillisLayout
		}
		dst = append(dst, '"')
		dst = time.UnixMilli(v).UTC().AppendFormat(dst, layout)
		return append(dst, '"')
	case lTimestampMicros, lLocalTimestampMicros:
		layout := timestampMicrosLayout
		if logical == lLocalTimestampMicros {
			layout = localMicrosLayout
		}
		dst = append(dst, '"')
		dst = time.UnixMicro(v).UTC().AppendFormat(dst, layout)
		return append(dst, '"')
	}
	return strconv.AppendInt(dst, v, 10)
}

func appendTimeOfDay(dst []byte, micros int64, digits int) []byte {
	if micros < 0 || micros >= 86400e6 {
		// Out of a day: the spec does not say; give the number.
		if digits == 3 {
			return strconv.AppendInt(dst, micros/1000, 10)
		}
		return strconv.AppendInt(dst, micros, 10)
	}
	s := micros / 1e6
	frac := micros % 1e6
	dst = append(dst, fmt.Sprintf(`"%02d:%02d:%02d`, s/3600, s/60%60, s%60)...)
	if digits == 3 {
		dst = append(dst, fmt.Sprintf(".%03d", frac/1000)...)
	} else {
		dst = append(dst, fmt.Sprintf(".%06d", frac)...)
	}
	return append(dst, '"')
}

// appendDecimal writes a two's-complement big-endian unscaled value with
// scale as an exact decimal string ("-12.30").
func appendDecimal(dst, b []byte, scale int) ([]byte, error) {
	if len(b) > 1024 {
		return nil, fmt.Errorf("decimal of %d bytes", len(b))
	}
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	s := n.String()
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if scale > 0 {
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	dst = append(dst, '"')
	if neg {
		dst = append(dst, '-')
	}
	dst = append(dst, s...)
	return append(dst, '"'), nil
}

func appendDuration(dst, b []byte) ([]byte, error) {
	if len(b) != 12 {
		return nil, fmt.Errorf("duration of %d bytes", len(b))
	}
	return fmt.Appendf(dst, `{"months":%d,"days":%d,"milliseconds":%d}`,
		binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])), nil
}

// ---- encoding: JSON -> Avro binary

// encode appends the Avro binary encoding of the JSON document js to dst.
func (s *avroSchema) encode(dst, js []byte) ([]byte, error) {
	i := jsonscan.SkipWS(js, 0)
	dst, end, err := encodeAt(dst, s.root, js, i, 0)
	if err != nil {
		return nil, err
	}
	if jsonscan.SkipWS(js, end) != len(js) {
		return nil, errors.New("value is not one JSON document")
	}
	return dst, nil
}

func errJSON(i int) error { return fmt.Errorf("value is not valid JSON (at byte %d)", i) }

// encodeAt encodes the JSON value that starts at b[i] and returns where it
// ends. Records, arrays and maps are walked in one pass that checks the
// JSON as it goes; every other value (and a record, array or map met where
// a union is) is first stepped over with jsonscan.Value, which checks it,
// and then encoded from its bytes.
func encodeAt(dst []byte, nd *avroNode, b []byte, i, depth int) ([]byte, int, error) {
	if depth > maxDepth {
		return nil, 0, errors.New("nested too deep")
	}
	if i >= len(b) {
		return nil, 0, errJSON(i)
	}
	switch c := b[i]; nd.kind {
	case aRecord:
		if c == '{' {
			return encodeRecordAt(dst, nd, b, i, depth)
		}
	case aArray:
		if c == '[' {
			return encodeBlocksAt(dst, nd, b, i, depth)
		}
	case aMap:
		if c == '{' {
			return encodeBlocksAt(dst, nd, b, i, depth)
		}
	case aUnion:
		if out, end, ok := encodeUnionAt(dst, nd, b, i, depth); ok {
			return out, end, nil
		}
	default:
		if !nd.slow {
			if out, end, ok := encodeLeafAt(dst, nd, b, i); ok {
				return out, end, nil
			}
		}
	}
	end := jsonscan.Value(b, i, jsonscan.MaxDepth)
	if end < 0 {
		return nil, 0, errJSON(i)
	}
	dst, err := encodeAvro(dst, nd, b[i:end], depth)
	return dst, end, err
}

// encodeLeafAt is encodeAt's fast path for the plain forms of strings,
// enum symbols, integers, floating-point numbers, booleans and null: ok is
// false for anything else (escapes, logical types, errors), which
// encodeAvro then handles, so that both write the same bytes for the same
// value and the errors are encodeAvro's.
func encodeLeafAt(dst []byte, nd *avroNode, b []byte, i int) (out []byte, end int, ok bool) {
	switch c := b[i]; nd.kind {
	case aString:
		if c == '"' {
			if end, plain := jsonscan.PlainString(b, i); plain {
				dst = binary.AppendVarint(dst, int64(end-i-2))
				return append(dst, b[i+1:end-1]...), end, true
			}
		}
	case aEnum:
		if c == '"' {
			if end, plain := jsonscan.PlainString(b, i); plain {
				if k, found := nd.byName[string(b[i+1:end-1])]; found {
					return binary.AppendVarint(dst, int64(k)), end, true
				}
			}
		}
	case aInt, aLong:
		if nd.logical == lNone {
			if n, end, ok := plainInt(b, i); ok && (nd.kind == aLong || n >= math.MinInt32 && n <= math.MaxInt32) {
				return binary.AppendVarint(dst, n), end, true
			}
		}
	case aDouble, aFloat:
		if c == '-' || '0' <= c && c <= '9' {
			end := jsonscan.Number(b, i)
			if end < 0 {
				return nil, 0, false
			}
			f, err := strconv.ParseFloat(string(b[i:end]), 64)
			if err != nil {
				return nil, 0, false
			}
			if nd.kind == aDouble {
				return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), end, true
			}
			if math.Abs(f) <= math.MaxFloat32 {
				return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), end, true
			}
		}
	case aBoolean:
		if c == 't' && hasLit(b, i, "true") {
			return append(dst, 1), i + 4, true
		}
		if c == 'f' && hasLit(b, i, "false") {
			return append(dst, 0), i + 5, true
		}
	case aNull:
		if c == 'n' && hasLit(b, i, "null") {
			return dst, i + 4, true
		}
	}
	return nil, 0, false
}

// encodeUnionAt is encodeAt's fast path for the unions of null and one
// other type (nd.fastOther) on values whose branch is plain to see: null,
// or a value whose first byte only that type's encodeLeafAt, record or
// array walk takes. ok is false for anything else and for every error, so
// that pickBranch and encodeAvro give the answer.
func encodeUnionAt(dst []byte, nd *avroNode, b []byte, i, depth int) (out []byte, end int, ok bool) {
	if nd.fastOther < 0 {
		return nil, 0, false
	}
	c := b[i]
	if c == 'n' {
		if !hasLit(b, i, "null") {
			return nil, 0, false
		}
		return binary.AppendVarint(dst, int64(nd.nullIdx)), i + 4, true
	}
	other := nd.union[nd.fastOther]
	dst = binary.AppendVarint(dst, int64(nd.fastOther))
	var err error
	switch other.kind {
	case aRecord:
		if c != '{' {
			return nil, 0, false
		}
		if dst, end, err = encodeRecordAt(dst, other, b, i, depth+1); err != nil {
			return nil, 0, false
		}
		return dst, end, true
	case aArray:
		if c != '[' {
			return nil, 0, false
		}
		if dst, end, err = encodeBlocksAt(dst, other, b, i, depth+1); err != nil {
			return nil, 0, false
		}
		return dst, end, true
	case aString, aEnum, aBoolean, aInt, aLong, aDouble, aFloat:
		if dst, end, ok = encodeLeafAt(dst, other, b, i); ok {
			return dst, end, true
		}
	}
	return nil, 0, false
}

// plainStringAt reports whether b[i] starts a plain JSON string (see
// jsonscan.PlainString) that nd, a string node with its fast paths on,
// takes as it is, and where it ends.
func plainStringAt(nd *avroNode, b []byte, i int) (end int, ok bool) {
	if nd.kind != aString || nd.slow || i >= len(b) || b[i] != '"' {
		return 0, false
	}
	return jsonscan.PlainString(b, i)
}

// plainInt reads an integer of at most 18 digits (no fraction, no
// exponent) at b[i].
func plainInt(b []byte, i int) (n int64, end int, ok bool) {
	neg := false
	if i < len(b) && b[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' && i-start < 19 {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	digits := i - start
	if digits == 0 || digits > 18 || (digits > 1 && b[start] == '0') {
		return 0, 0, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, 0, false
	}
	if neg {
		n = -n
	}
	return n, i, true
}

func hasLit(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// memberKey reads the key of an object member at b[i] (a '"'), and returns
// it, the index of its value and an error for bad JSON.
func memberKey(b []byte, i int) (key []byte, val int, err error) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, errJSON(i)
	}
	ke := jsonscan.String(b, i)
	if ke < 0 {
		return nil, 0, errJSON(i)
	}
	key = b[i+1 : ke-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		if key, err = jsonString(b[i:ke]); err != nil {
			return nil, 0, err
		}
	}
	j := jsonscan.SkipWS(b, ke)
	if j >= len(b) || b[j] != ':' {
		return nil, 0, errJSON(j)
	}
	return key, jsonscan.SkipWS(b, j+1), nil
}

// nextMember steps over the ',' or the closing c after a member or element
// at b[i]: more is false at the end of the object or array.
func nextMember(b []byte, i int, c byte) (next int, more bool, err error) {
	i = jsonscan.SkipWS(b, i)
	switch {
	case i >= len(b):
		return 0, false, errJSON(i)
	case b[i] == c:
		return i + 1, false, nil
	case b[i] == ',':
		return jsonscan.SkipWS(b, i+1), true, nil
	}
	return 0, false, errJSON(i)
}

// encodeRecordAt encodes a record from the object at b[i]. Members in the
// schema's order are encoded as they come; from the first member out of
// order on, the rest are noted and encoded in the schema's order at the end.
func encodeRecordAt(dst []byte, nd *avroNode, b []byte, i, depth int) ([]byte, int, error) {
	var seenStack [32]bool
	var seen []bool
	if len(nd.fields) <= len(seenStack) {
		seen = seenStack[:len(nd.fields)]
	} else {
		seen = make([]bool, len(nd.fields))
	}
	next := 0         // fields [0, next) are written
	var late [][2]int // value spans of fields met out of order
	i = jsonscan.SkipWS(b, i+1)
	more := true
	if i < len(b) && b[i] == '}' {
		i, more = i+1, false
	}
	var err error
	for more {
		var fi int
		if late == nil && next < len(nd.fields) && nd.fields[next].quoted != "" && hasLit(b, i, nd.fields[next].quoted) {
			q := nd.fields[next].quoted
			// The member the schema has next, its name as plain as
			// the schema writes it: no lookup.
			fi = next
			j := jsonscan.SkipWS(b, i+len(q))
			if j >= len(b) || b[j] != ':' {
				return nil, 0, errJSON(j)
			}
			i = jsonscan.SkipWS(b, j+1)
		} else {
			var key []byte
			if key, i, err = memberKey(b, i); err != nil {
				return nil, 0, err
			}
			var ok bool
			if fi, ok = nd.byName[string(key)]; !ok {
				return nil, 0, fmt.Errorf("field %q is not in record %s", key, nd.name)
			}
		}
		if seen[fi] {
			return nil, 0, fmt.Errorf("field %q appears twice", nd.fields[fi].name)
		}
		seen[fi] = true
		if late == nil && fi == next {
			fn := nd.fields[fi].node
			if end, ok := plainStringAt(fn, b, i); ok {
				// encodeLeafAt's string case, without its two calls.
				dst = binary.AppendVarint(dst, int64(end-i-2))
				dst = append(dst, b[i+1:end-1]...)
				i = end
			} else if dst, i, err = encodeAt(dst, fn, b, i, depth+1); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", nd.fields[fi].name, err)
			}
			next++
		} else {
			if late == nil {
				late = make([][2]int, len(nd.fields))
			}
			end := jsonscan.Value(b, i, jsonscan.MaxDepth)
			if end < 0 {
				return nil, 0, errJSON(i)
			}
			late[fi] = [2]int{i, end}
			i = end
		}
		if i, more, err = nextMember(b, i, '}'); err != nil {
			return nil, 0, err
		}
	}
	for k := next; k < len(nd.fields); k++ {
		f := &nd.fields[k]
		switch {
		case seen[k]:
			dst, _, err = encodeAt(dst, f.node, b[:late[k][1]], late[k][0], depth+1)
		case f.def == nil:
			return nil, 0, fmt.Errorf("field %q of record %s is missing (and has no default)", f.name, nd.name)
		case f.node.kind == aUnion:
			dst = binary.AppendVarint(dst, int64(f.defBranch))
			dst, err = encodeAvro(dst, f.node.union[f.defBranch], f.def, depth+1)
		default:
			dst, err = encodeAvro(dst, f.node, f.def, depth+1)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return dst, i, nil
}

// encodeBlocksAt encodes an array (from a JSON array) or a map (from an
// object) at b[i] as one block.
func encodeBlocksAt(dst []byte, nd *avroNode, b []byte, i, depth int) ([]byte, int, error) {
	isMap := nd.kind == aMap
	closer := byte(']')
	if isMap {
		closer = '}'
	}
	start := len(dst)
	dst = append(dst, make([]byte, binary.MaxVarintLen64)...)
	n := 0
	i = jsonscan.SkipWS(b, i+1)
	more := true
	if i < len(b) && b[i] == closer {
		i, more = i+1, false
	}
	var err error
	for more {
		if isMap {
			var key []byte
			if key, i, err = memberKey(b, i); err != nil {
				return nil, 0, err
			}
			if !utf8.Valid(key) {
				return nil, 0, errors.New("map key is not UTF-8")
			}
			dst = binary.AppendVarint(dst, int64(len(key)))
			dst = append(dst, key...)
			if dst, i, err = encodeAt(dst, nd.items, b, i, depth+1); err != nil {
				return nil, 0, fmt.Errorf("%q: %w", key, err)
			}
		} else if dst, i, err = encodeAt(dst, nd.items, b, i, depth+1); err != nil {
			return nil, 0, fmt.Errorf("[%d]: %w", n, err)
		}
		n++
		if i, more, err = nextMember(b, i, closer); err != nil {
			return nil, 0, err
		}
	}
	return finishBlock(dst, start, n), i, nil
}

// jsonKind classifies a JSON value by its first byte.
func jsonKind(v []byte) byte {
	switch v[0] {
	case '{', '[', '"', 't', 'f', 'n':
		return v[0]
	}
	return '0'
}

func typeErr(nd *avroNode, v []byte) error {
	what := map[byte]string{'{': "an object", '[': "an array", '"': "a string", 't': "a boolean", 'f': "a boolean", 'n': "null", '0': "a number"}[jsonKind(v)]
	return fmt.Errorf("want %s, got %s", describe(nd), what)
}

func describe(nd *avroNode) string {
	switch nd.kind {
	case aUnion:
		names := make([]string, len(nd.union))
		for i, b := range nd.union {
			names[i] = b.name
		}
		return "one of [" + strings.Join(names, ", ") + "]"
	case aRecord, aEnum, aFixed:
		return fmt.Sprintf("%s %s", map[avroKind]string{aRecord: "record", aEnum: "enum", aFixed: "fixed"}[nd.kind], nd.name)
	}
	return nd.name
}

func encodeAvro(dst []byte, nd *avroNode, v []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deep")
	}
	k := jsonKind(v)
	switch nd.kind {
	case aNull:
		if k != 'n' {
			return nil, typeErr(nd, v)
		}
		return dst, nil
	case aBoolean:
		switch k {
		case 't':
			return append(dst, 1), nil
		case 'f':
			return append(dst, 0), nil
		}
		return nil, typeErr(nd, v)
	case aInt, aLong:
		n, err := jsonLong(nd, v)
		if err != nil {
			return nil, err
		}
		if nd.kind == aInt && (n < math.MinInt32 || n > math.MaxInt32) {
			return nil, fmt.Errorf("%d does not fit an int", n)
		}
		return binary.AppendVarint(dst, n), nil
	case aFloat, aDouble:
		f, err := jsonFloat(v)
		if err != nil {
			return nil, fmt.Errorf("want %s: %w", nd.name, err)
		}
		if nd.kind == aFloat {
			if !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
				return nil, fmt.Errorf("%v does not fit a float", f)
			}
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case aString:
		if k != '"' {
			return nil, typeErr(nd, v)
		}
		s, err := jsonString(v)
		if err != nil {
			return nil, err
		}
		dst = binary.AppendVarint(dst, int64(len(s)))
		return append(dst, s...), nil
	case aBytes:
		b, err := jsonBytes(nd, v, -1)
		if err != nil {
			return nil, err
		}
		dst = binary.AppendVarint(dst, int64(len(b)))
		return append(dst, b...), nil
	case aFixed:
		b, err := jsonBytes(nd, v, nd.size)
		if err != nil {
			return nil, err
		}
		return append(dst, b...), nil
	case aEnum:
		if k != '"' {
			return nil, typeErr(nd, v)
		}
		s, err := jsonString(v)
		if err != nil {
			return nil, err
		}
		i, ok := nd.byName[string(s)]
		if !ok {
			return nil, fmt.Errorf("%q is not a symbol of enum %s", s, nd.name)
		}
		return binary.AppendVarint(dst, int64(i)), nil
	case aUnion:
		b, inner, err := pickBranch(nd, v)
		if err != nil {
			return nil, err
		}
		dst = binary.AppendVarint(dst, int64(b))
		return encodeAvro(dst, nd.union[b], inner, depth+1)
	case aRecord:
		if k != '{' {
			return nil, typeErr(nd, v)
		}
		var stack [32][]byte
		vals := stack[:0]
		if len(nd.fields) > len(stack) {
			vals = make([][]byte, 0, len(nd.fields))
		}
		vals = vals[:len(nd.fields)]
		for i := range vals {
			vals[i] = nil
		}
		err := eachMember(v, func(key, val []byte) error {
			fi, ok := nd.byName[string(key)]
			if !ok {
				return fmt.Errorf("field %q is not in record %s", key, nd.name)
			}
			if vals[fi] != nil {
				return fmt.Errorf("field %q appears twice", key)
			}
			vals[fi] = val
			return nil
		})
		if err != nil {
			return nil, err
		}
		for i := range nd.fields {
			f := &nd.fields[i]
			val := vals[i]
			if val == nil {
				if f.def == nil {
					return nil, fmt.Errorf("field %q of record %s is missing (and has no default)", f.name, nd.name)
				}
				if f.node.kind == aUnion {
					dst = binary.AppendVarint(dst, int64(f.defBranch))
					dst, err = encodeAvro(dst, f.node.union[f.defBranch], f.def, depth+1)
				} else {
					dst, err = encodeAvro(dst, f.node, f.def, depth+1)
				}
			} else {
				dst, err = encodeAvro(dst, f.node, val, depth+1)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.name, err)
			}
		}
		return dst, nil
	case aArray:
		if k != '[' {
			return nil, typeErr(nd, v)
		}
		n := 0
		var body []byte
		var err error
		// One block: count, then the items.
		start := len(dst)
		dst = append(dst, make([]byte, binary.MaxVarintLen64)...)
		body = dst
		err = eachElement(v, func(el []byte) error {
			var e error
			body, e = encodeAvro(body, nd.items, el, depth+1)
			n++
			if e != nil {
				return fmt.Errorf("[%d]: %w", n-1, e)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return finishBlock(body, start, n), nil
	case aMap:
		if k != '{' {
			return nil, typeErr(nd, v)
		}
		n := 0
		start := len(dst)
		body := append(dst, make([]byte, binary.MaxVarintLen64)...)
		err := eachMember(v, func(key, val []byte) error {
			body = binary.AppendVarint(body, int64(len(key)))
			body = append(body, key...)
			var e error
			body, e = encodeAvro(body, nd.items, val, depth+1)
			n++
			if e != nil {
				return fmt.Errorf("%q: %w", key, e)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return finishBlock(body, start, n), nil
	}
	return nil, fmt.Errorf("unknown node kind %d", nd.kind)
}

// finishBlock writes the item count of the block whose items follow the
// MaxVarintLen64 bytes reserved at start, closes it with a zero block, and
// moves the items down over the unused part of the reservation.
func finishBlock(b []byte, start, n int) []byte {
	if n == 0 {
		b = b[:start]
		return append(b, 0)
	}
	var cnt [binary.MaxVarintLen64]byte
	c := binary.PutVarint(cnt[:], int64(n))
	items := b[start+binary.MaxVarintLen64:]
	copy(b[start:], cnt[:c])
	m := copy(b[start+c:], items)
	b = b[:start+c+m]
	return append(b, 0)
}

// pickBranch chooses the union branch for a JSON value (the collapsed
// mapping: a union's value is written as the branch's value). An object
// with one member named after a branch ({"com.example.Order": {...}},
// {"string": "x"}, Avro's own JSON encoding) picks that branch. Otherwise
// the first branch, in schema order, whose type the value has exactly
// (integral numbers: int, long; other numbers: float, double; strings:
// string, enum with that symbol; objects: a record with every field it
// needs, then map), then the first branch the value converts to (strings:
// logical types, bytes, fixed; numbers: the other numeric types).
func pickBranch(nd *avroNode, v []byte) (int, []byte, error) {
	k := jsonKind(v)
	if k == 'n' {
		if nd.nullIdx >= 0 {
			return nd.nullIdx, v, nil
		}
		return 0, nil, typeErr(nd, v)
	}
	if k == '{' {
		var key, inner []byte
		count := 0
		_ = eachMember(v, func(k, val []byte) error {
			count++
			key, inner = k, val
			return nil
		})
		if count == 1 {
			for i, b := range nd.union {
				if b.name == string(key) {
					return i, inner, nil
				}
			}
		}
	}
	integral := k == '0' && !bytes.ContainsAny(v, ".eE")
	for pass := 0; pass < 2; pass++ {
		for i, b := range nd.union {
			if branchAccepts(b, v, k, integral, pass == 0) {
				return i, v, nil
			}
		}
	}
	return 0, nil, typeErr(nd, v)
}

func branchAccepts(b *avroNode, v []byte, k byte, integral, exact bool) bool {
	switch k {
	case 't', 'f':
		return b.kind == aBoolean
	case '[':
		return b.kind == aArray
	case '0':
		switch b.kind {
		case aInt, aLong:
			if !integral {
				return false
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			return err == nil && (b.kind == aLong || n >= math.MinInt32 && n <= math.MaxInt32) &&
				(exact == (b.logical == lNone))
		case aFloat, aDouble:
			return exact != integral
		case aBytes, aFixed:
			return !exact && b.logical == lDecimal
		}
	case '"':
		s, err := jsonString(v)
		if err != nil {
			return false
		}
		switch b.kind {
		case aString:
			return exact
		case aEnum:
			_, ok := b.byName[string(s)]
			return exact && ok
		case aInt, aLong:
			_, err := jsonLong(b, v)
			return !exact && b.logical != lNone && err == nil
		case aFloat, aDouble:
			_, err := jsonFloat(v)
			return !exact && err == nil
		case aBytes, aFixed:
			_, err := jsonBytes(b, v, map[bool]int{true: b.size, false: -1}[b.kind == aFixed])
			return !exact && err == nil
		}
	case '{':
		switch b.kind {
		case aMap:
			return !exact
		case aRecord:
			if !exact {
				return false
			}
			ok := true
			seen := 0
			_ = eachMember(v, func(key, _ []byte) error {
				if _, in := b.byName[string(key)]; !in {
					ok = false
				}
				seen++
				return nil
			})
			if !ok {
				return false
			}
			// every field without a default must be present
			need := 0
			for i := range b.fields {
				if b.fields[i].def == nil {
					need++
				}
			}
			return seen >= need && hasRequired(b, v)
		}
	}
	return false
}

func hasRequired(b *avroNode, v []byte) bool {
	present := make(map[string]bool, len(b.fields))
	_ = eachMember(v, func(key, _ []byte) error { present[string(key)] = true; return nil })
	for i := range b.fields {
		if b.fields[i].def == nil && !present[b.fields[i].name] {
			return false
		}
	}
	return true
}

// jsonLong reads an integer for an int or long, or for its logical type the
// string form decode writes (timestamps, dates, times) or a number.
func jsonLong(nd *avroNode, v []byte) (int64, error) {
	if jsonKind(v) == '"' && nd.logical != lNone {
		s, err := jsonString(v)
		if err != nil {
			return 0, err
		}
		return parseLogical(nd.logical, string(s))
	}
	if jsonKind(v) != '0' {
		return 0, typeErr(nd, v)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		// 1e3 or 10.0: an integral value written as a float.
		f, ferr := strconv.ParseFloat(string(v), 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
			return 0, fmt.Errorf("want %s, got %s", nd.name, v)
		}
		n = int64(f)
	}
	return n, nil
}

func parseLogical(l uint8, s string) (int64, error) {
	switch l {
	case lDate:
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return 0, fmt.Errorf("date %q: want YYYY-MM-DD", s)
		}
		return t.Unix() / 86400, nil
	case lTimeMillis, lTimeMicros:
		t, err := time.Parse("15:04:05.999999999", s)
		if err != nil {
			return 0, fmt.Errorf("time %q: want HH:MM:SS[.fraction]", s)
		}
		us := int64(t.Hour()*3600+t.Minute()*60+t.Second())*1e6 + int64(t.Nanosecond()/1000)
		if l == lTimeMillis {
			return us / 1000, nil
		}
		return us, nil
	case lTimestampMillis, lTimestampMicros:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("timestamp %q: want RFC 3339 (2006-01-02T15:04:05.000Z)", s)
		}
		if l == lTimestampMillis {
			return t.UnixMilli(), nil
		}
		return t.UnixMicro(), nil
	case lLocalTimestampMillis, lLocalTimestampMicros:
		t, err := time.Parse("2006-01-02T15:04:05.999999999", s)
		if err != nil {
			return 0, fmt.Errorf("local timestamp %q: want 2006-01-02T15:04:05.000", s)
		}
		if l == lLocalTimestampMillis {
			return t.UnixMilli(), nil
		}
		return t.UnixMicro(), nil
	}
	return 0, fmt.Errorf("%q is not a number", s)
}

func jsonFloat(v []byte) (float64, error) {
	switch jsonKind(v) {
	case '0':
		return strconv.ParseFloat(string(v), 64)
	case '"':
		s, err := jsonString(v)
		if err != nil {
			return 0, err
		}
		switch string(s) {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return 0, fmt.Errorf("got %s, not a number", describeJSON(v))
}

func describeJSON(v []byte) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}

// jsonBytes reads bytes or fixed: base64 text, or for a decimal its string
// or number form. size is the fixed size, or -1.
func jsonBytes(nd *avroNode, v []byte, size int) ([]byte, error) {
	if nd.logical == lDecimal {
		return decimalBytes(nd, v, size)
	}
	if nd.logical == lDuration && jsonKind(v) == '{' {
		var d struct{ Months, Days, Milliseconds uint32 }
		if err := json.Unmarshal(v, &d); err != nil {
			return nil, fmt.Errorf("duration: %w", err)
		}
		b := binary.LittleEndian.AppendUint32(nil, d.Months)
		b = binary.LittleEndian.AppendUint32(b, d.Days)
		return binary.LittleEndian.AppendUint32(b, d.Milliseconds), nil
	}
	if jsonKind(v) != '"' {
		return nil, typeErr(nd, v)
	}
	s, err := jsonString(v)
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(string(s))
	if err != nil {
		return nil, fmt.Errorf("want %s as base64: %w", nd.name, err)
	}
	if size >= 0 && len(b) != size {
		return nil, fmt.Errorf("fixed %s holds %d bytes, got %d", nd.name, size, len(b))
	}
	return b, nil
}

// decimalBytes turns "12.30" (or 12.3) into the two's-complement unscaled
// value at the schema's scale; more fraction digits than the scale is an
// error (no silent rounding).
func decimalBytes(nd *avroNode, v []byte, size int) ([]byte, error) {
	var s string
	switch jsonKind(v) {
	case '"':
		b, err := jsonString(v)
		if err != nil {
			return nil, err
		}
		s = string(b)
	case '0':
		s = string(v)
	default:
		return nil, typeErr(nd, v)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || strings.ContainsAny(s, "/") {
		return nil, fmt.Errorf("decimal %q is not a number", s)
	}
	unscaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(nd.scale)), nil)))
	if !unscaled.IsInt() {
		return nil, fmt.Errorf("decimal %s has more than %d fraction digits", s, nd.scale)
	}
	n := unscaled.Num()
	out := twosComplement(n)
	if size >= 0 {
		if len(out) > size {
			return nil, fmt.Errorf("decimal %s does not fit %d bytes", s, size)
		}
		pad := byte(0)
		if n.Sign() < 0 {
			pad = 0xff
		}
		full := bytes.Repeat([]byte{pad}, size-len(out))
		out = append(full, out...)
	}
	return out, nil
}

func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -n = 2^k - |n| for the smallest k that keeps the sign bit.
	l := (n.BitLen() + 8) / 8
	m := new(big.Int).Add(n, new(big.Int).Lsh(big.NewInt(1), uint(l)*8))
	b := m.Bytes()
	for len(b) < l {
		b = append([]byte{0xff}, b...)
	}
	return b
}

// jsonString returns the text of the JSON string v (quotes included in v).
// Without escapes it is v's own bytes.
func jsonString(v []byte) ([]byte, error) {
	if len(v) < 2 || v[0] != '"' {
		return nil, errors.New("not a string")
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		if !utf8.Valid(in) {
			return nil, errors.New("string is not UTF-8")
		}
		return in, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// eachMember calls fn for each member of the JSON object v (valid JSON).
func eachMember(v []byte, fn func(key, val []byte) error) error {
	i := jsonscan.SkipWS(v, 1)
	if v[i] == '}' {
		return nil
	}
	for {
		ke := jsonscan.SkipString(v, i)
		key := v[i+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			k, err := jsonString(v[i:ke])
			if err != nil {
				return err
			}
			key = k
		}
		i = jsonscan.SkipWS(v, ke)
		i = jsonscan.SkipWS(v, i+1) // ':'
		ve := jsonscan.Skip(v, i)
		if err := fn(key, v[i:ve]); err != nil {
			return err
		}
		i = jsonscan.SkipWS(v, ve)
		if v[i] == '}' {
			return nil
		}
		i = jsonscan.SkipWS(v, i+1) // ','
	}
}

// eachElement calls fn for each element of the JSON array v (valid JSON).
func eachElement(v []byte, fn func(el []byte) error) error {
	i := jsonscan.SkipWS(v, 1)
	if v[i] == ']' {
		return nil
	}
	for {
		ve := jsonscan.Skip(v, i)
		if err := fn(v[i:ve]); err != nil {
			return err
		}
		i = jsonscan.SkipWS(v, ve)
		if v[i] == ']' {
			return nil
		}
		i = jsonscan.SkipWS(v, i+1)
	}
}
