// The orders downgrade as it was before its reader was rewritten for speed (commit 4e7cd96), frozen
// as the test oracle of package downgrade: TestOracle and FuzzOracle check
// that the faster reader gives the same output and errors. Do not change
// it. It lives in a _test.go file so that it is never built into the plugin
// (nor counted as a second copy of downgrade.go). Its names are this file's:
// oracleValue is the old downgrade.Value, oracleAppendString the old
// AppendString; the rest keep their old names.

package downgrade_test

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting accepted; the top-level object is level 1.
const MaxDepth = 64

// SchemaHeader is the header that carries the Fluid schema version.
const SchemaHeader = "fluid-schema-version"

// ErrNull is returned for a null record value.
var ErrNull = errors.New("null value")

// oracleValue downgrades one orders-v2 JSON value to the orders-v1 shape, appending
// the result to dst. A nil in means a null value. It allocates nothing but
// the growth of dst.
func oracleValue(dst, in []byte) ([]byte, error) {
	if in == nil {
		return dst, ErrNull
	}
	p := parser{b: in}
	var o order
	if err := p.top(&o); err != nil {
		return dst, err
	}
	dst = append(dst, `{"order_id":`...)
	dst = appendRaw(dst, in[o.orderID[0]:o.orderID[1]])
	dst = append(dst, `,"customer_id":`...)
	dst = appendRaw(dst, in[o.customerID[0]:o.customerID[1]])
	dst = append(dst, `,"amount_cents":`...)
	dst = strconv.AppendInt(dst, o.amount, 10)
	dst = append(dst, `,"currency":`...)
	dst = appendRaw(dst, in[o.currency[0]:o.currency[1]])
	dst = append(dst, '}')
	return dst, nil
}

// appendRaw appends the JSON string whose validated body (between the
// quotes) is raw, re-escaped minimally.
func appendRaw(dst, raw []byte) []byte {
	var tmp [64]byte
	dec := tmp[:0]
	if len(raw) > len(tmp) {
		dec = make([]byte, 0, len(raw))
	}
	p := parser{b: raw}
	for p.i < len(raw) {
		// The body was validated: decode it the same way, without checks.
		start := p.i
		for p.i < len(raw) && raw[p.i] != '\\' {
			p.i++
		}
		dec = append(dec, raw[start:p.i]...)
		if p.i == len(raw) {
			break
		}
		switch e := raw[p.i+1]; e {
		case 'b':
			dec, p.i = append(dec, '\b'), p.i+2
		case 'f':
			dec, p.i = append(dec, '\f'), p.i+2
		case 'n':
			dec, p.i = append(dec, '\n'), p.i+2
		case 'r':
			dec, p.i = append(dec, '\r'), p.i+2
		case 't':
			dec, p.i = append(dec, '\t'), p.i+2
		case 'u':
			r, _ := p.unicodeEscape()
			dec = utf8.AppendRune(dec, r)
		default: // " \ /
			dec, p.i = append(dec, e), p.i+2
		}
	}
	return oracleAppendString(dst, dec)
}

// shortEscape holds the letter of each byte AppendString escapes as a
// backslash and one letter; zero for the others.
var shortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// oracleAppendString appends s as a JSON string with minimal escaping: '"', '\\',
// \b \f \n \r \t, other U+0000..U+001F as \u00xx (lowercase hex), and every
// other byte raw. s must be valid UTF-8.
func oracleAppendString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		if e := shortEscape[c]; e != 0 {
			dst = append(dst, '\\', e)
		} else {
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// order holds the wanted string fields as ranges of their bodies in the
// input (validated, still escaped).
type order struct {
	orderID, customerID, currency [2]int
	amount                        int64
	seen                          uint8
}

const (
	seenOrderID = 1 << iota
	seenCustomer
	seenAmount
	seenCurrency
)

type parser struct {
	b   []byte
	i   int
	key []byte // the last key read, decoded
	dec []byte // storage for keys with escapes, reused
}

// errf returns "at byte N: msg". (No fmt: it would add ~30% to a Go Wasm
// plugin's size, and so to its load time.)
func (p *parser) errf(msg string) error {
	return errors.New("at byte " + strconv.Itoa(p.i) + ": " + msg)
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// The object reader: objOpen at '{', then objKey and a value for each
// member, then objNext; no closures, so nothing escapes.

// objOpen reads '{' at nesting level depth and reports whether the object
// is empty (and already closed).
func (p *parser) objOpen(depth int) (empty bool, err error) {
	if depth > MaxDepth {
		return false, p.errf("nesting deeper than " + strconv.Itoa(MaxDepth))
	}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return true, nil
	}
	return false, nil
}

// objKey reads a key and its ':' into p.key.
func (p *parser) objKey() error {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return p.errf("expected a string key")
	}
	// A key without escapes is its own decoded form: use it in place, with
	// no copy (an allocation per key costs ~1 µs in a Go Wasm guest).
	start := p.i + 1
	if _, err := p.str(nil, false); err != nil {
		return err
	}
	p.key = p.b[start : p.i-1]
	for _, c := range p.key {
		if c == '\\' {
			k := parser{b: p.b, i: start - 1}
			p.key, _ = k.str(p.dec[:0], true) // validated above
			p.dec = p.key
			break
		}
	}
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != ':' {
		return p.errf("expected ':'")
	}
	p.i++
	return nil
}

// objNext reads ',' (more members) or '}' (the end).
func (p *parser) objNext() (more bool, err error) {
	p.ws()
	if p.i >= len(p.b) {
		return false, p.errf("unterminated object")
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		return true, nil
	case '}':
		p.i++
		return false, nil
	}
	return false, p.errf("expected ',' or '}'")
}

func (p *parser) top(o *order) error {
	p.ws()
	if p.i >= len(p.b) {
		return p.errf("empty value")
	}
	if p.b[p.i] != '{' {
		return p.errf("value is not a JSON object")
	}
	var keys keySet
	empty, err := p.objOpen(1)
	for more := !empty; err == nil && more; more, err = p.objNext() {
		if err = p.objKey(); err != nil {
			break
		}
		if !keys.add(p.key) {
			return errors.New("duplicate key " + strconv.Quote(string(p.key)))
		}
		switch string(p.key) {
		case "order_id":
			o.orderID, err = p.keptString("order_id")
			o.seen |= seenOrderID
		case "currency":
			o.currency, err = p.keptString("currency")
			o.seen |= seenCurrency
		case "amount_cents":
			o.amount, err = p.integer()
			o.seen |= seenAmount
		case "customer":
			o.seen |= seenCustomer
			err = p.customer(o)
		default:
			err = p.value(2)
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	p.ws()
	if p.i != len(p.b) {
		return p.errf("data after the JSON object")
	}
	switch {
	case o.seen&seenOrderID == 0:
		return errors.New("missing order_id")
	case o.seen&seenCustomer == 0:
		return errors.New("missing customer")
	case o.seen&seenAmount == 0:
		return errors.New("missing amount_cents")
	case o.seen&seenCurrency == 0:
		return errors.New("missing currency")
	}
	return nil
}

func (p *parser) customer(o *order) error {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return p.errf("customer is not an object")
	}
	var keys keySet
	found := false
	empty, err := p.objOpen(2)
	for more := !empty; err == nil && more; more, err = p.objNext() {
		if err = p.objKey(); err != nil {
			break
		}
		if !keys.add(p.key) {
			return errors.New("duplicate key " + strconv.Quote(string(p.key)) + " in customer")
		}
		if string(p.key) == "id" {
			o.customerID, err = p.keptString("customer.id")
			found = true
		} else {
			err = p.value(3)
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	if !found {
		return errors.New("missing customer.id")
	}
	return nil
}

// keptString reads a string value and returns the range of its body.
func (p *parser) keptString(field string) ([2]int, error) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		if err := p.value(2); err != nil {
			return [2]int{}, err
		}
		return [2]int{}, errors.New(field + " is not a string")
	}
	start := p.i + 1
	if _, err := p.str(nil, false); err != nil {
		return [2]int{}, err
	}
	return [2]int{start, p.i - 1}, nil
}

// integer reads an integer literal that fits int64.
func (p *parser) integer() (int64, error) {
	p.ws()
	start := p.i
	if p.i >= len(p.b) || (p.b[p.i] != '-' && (p.b[p.i] < '0' || p.b[p.i] > '9')) {
		if err := p.value(2); err != nil {
			return 0, err
		}
		return 0, errors.New("amount_cents is not a number")
	}
	isInt, err := p.number()
	if err != nil {
		return 0, err
	}
	if !isInt {
		return 0, errors.New("amount_cents is not an integer")
	}
	lit := p.b[start:p.i]
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	var u uint64
	for _, c := range lit {
		d := uint64(c - '0')
		if u > (1<<64-1-d)/10 {
			return 0, errors.New("amount_cents does not fit int64")
		}
		u = u*10 + d
	}
	switch {
	case neg && u <= 1<<63:
		return int64(-u), nil //nolint:gosec // -u wraps as intended for 1<<63
	case !neg && u < 1<<63:
		return int64(u), nil
	}
	return 0, errors.New("amount_cents does not fit int64")
}

// value reads and validates any JSON value; depth is the level an object or
// array here would have.
func (p *parser) value(depth int) error {
	p.ws()
	if p.i >= len(p.b) {
		return p.errf("unexpected end of value")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		empty, err := p.objOpen(depth)
		for more := !empty; err == nil && more; more, err = p.objNext() {
			if err = p.objKey(); err == nil {
				err = p.value(depth + 1)
			}
			if err != nil {
				break
			}
		}
		return err
	case c == '[':
		if depth > MaxDepth {
			return p.errf("nesting deeper than " + strconv.Itoa(MaxDepth))
		}
		p.i++
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return nil
		}
		for {
			if err := p.value(depth + 1); err != nil {
				return err
			}
			p.ws()
			if p.i >= len(p.b) {
				return p.errf("unterminated array")
			}
			switch p.b[p.i] {
			case ',':
				p.i++
			case ']':
				p.i++
				return nil
			default:
				return p.errf("expected ',' or ']'")
			}
		}
	case c == '"':
		_, err := p.str(nil, false)
		return err
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := p.number()
		return err
	default:
		return p.errf("unexpected character " + strconv.QuoteRune(rune(c)))
	}
}

func (p *parser) lit(s string) error {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return p.errf("invalid literal")
	}
	p.i += len(s)
	return nil
}

// number reads a JSON number and reports whether it has neither fraction nor
// exponent.
func (p *parser) number() (isInt bool, err error) {
	b := p.b
	if p.i < len(b) && b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(b) && b[p.i] == '0':
		p.i++
	case p.i < len(b) && b[p.i] >= '1' && b[p.i] <= '9':
		for p.i < len(b) && b[p.i] >= '0' && b[p.i] <= '9' {
			p.i++
		}
	default:
		return false, p.errf("invalid number")
	}
	isInt = true
	if p.i < len(b) && b[p.i] == '.' {
		isInt = false
		p.i++
		if p.i >= len(b) || b[p.i] < '0' || b[p.i] > '9' {
			return false, p.errf("invalid number")
		}
		for p.i < len(b) && b[p.i] >= '0' && b[p.i] <= '9' {
			p.i++
		}
	}
	if p.i < len(b) && (b[p.i] == 'e' || b[p.i] == 'E') {
		isInt = false
		p.i++
		if p.i < len(b) && (b[p.i] == '+' || b[p.i] == '-') {
			p.i++
		}
		if p.i >= len(b) || b[p.i] < '0' || b[p.i] > '9' {
			return false, p.errf("invalid number")
		}
		for p.i < len(b) && b[p.i] >= '0' && b[p.i] <= '9' {
			p.i++
		}
	}
	return isInt, nil
}

// str reads a string at p.i (which is '"'), validating UTF-8 and escapes.
// When keep is set the decoded bytes are appended to dst.
func (p *parser) str(dst []byte, keep bool) ([]byte, error) {
	b := p.b
	p.i++ // opening quote
	for {
		start := p.i
		for p.i < len(b) && b[p.i] >= 0x20 && b[p.i] < 0x80 && b[p.i] != '"' && b[p.i] != '\\' {
			p.i++
		}
		if keep {
			dst = append(dst, b[start:p.i]...)
		}
		if p.i >= len(b) {
			return dst, p.errf("unterminated string")
		}
		c := b[p.i]
		switch {
		case c == '"':
			p.i++
			return dst, nil
		case c < 0x20:
			return dst, p.errf("control character in string")
		case c >= 0x80:
			r, n := utf8.DecodeRune(b[p.i:])
			if r == utf8.RuneError && n <= 1 {
				return dst, p.errf("invalid UTF-8 in string")
			}
			if keep {
				dst = append(dst, b[p.i:p.i+n]...)
			}
			p.i += n
		default: // backslash
			if p.i+1 >= len(b) {
				return dst, p.errf("unterminated string")
			}
			e := b[p.i+1]
			var out byte
			switch e {
			case '"', '\\', '/':
				out = e
			case 'b':
				out = '\b'
			case 'f':
				out = '\f'
			case 'n':
				out = '\n'
			case 'r':
				out = '\r'
			case 't':
				out = '\t'
			case 'u':
				r, err := p.unicodeEscape()
				if err != nil {
					return dst, err
				}
				if keep {
					dst = utf8.AppendRune(dst, r)
				}
				continue
			default:
				return dst, p.errf("invalid escape \\" + string(rune(e)))
			}
			if keep {
				dst = append(dst, out)
			}
			p.i += 2
		}
	}
}

// unicodeEscape reads \uXXXX (and a following low surrogate escape) at p.i.
func (p *parser) unicodeEscape() (rune, error) {
	r, ok := p.hex4(p.i + 2)
	if !ok {
		return 0, p.errf("invalid \\u escape")
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, p.errf("unpaired surrogate escape")
	case r >= 0xD800 && r <= 0xDBFF:
		if p.i+12 > len(p.b) || p.b[p.i+6] != '\\' || p.b[p.i+7] != 'u' {
			return 0, p.errf("unpaired surrogate escape")
		}
		lo, ok := p.hex4(p.i + 8)
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0, p.errf("unpaired surrogate escape")
		}
		p.i += 12
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), nil
	}
	p.i += 6
	return r, nil
}

func (p *parser) hex4(at int) (rune, bool) {
	if at+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// keySet records the decoded keys of one object to find duplicates. The
// first keys are copied into a fixed buffer, so small objects cost no
// allocation; a map takes over for big ones.
type keySet struct {
	buf  [256]byte
	used int
	ends [16]uint16
	n    int
	big  map[string]struct{}
}

func (k *keySet) add(key []byte) bool {
	if k.big != nil {
		if _, dup := k.big[string(key)]; dup {
			return false
		}
		k.big[string(key)] = struct{}{}
		return true
	}
	start := 0
	for _, end := range k.ends[:k.n] {
		if string(k.buf[start:end]) == string(key) {
			return false
		}
		start = int(end)
	}
	if k.n < len(k.ends) && k.used+len(key) <= len(k.buf) {
		k.used += copy(k.buf[k.used:], key)
		k.ends[k.n] = uint16(k.used)
		k.n++
		return true
	}
	k.big = make(map[string]struct{}, 2*len(k.ends))
	start = 0
	for _, end := range k.ends[:k.n] {
		k.big[string(k.buf[start:end])] = struct{}{}
		start = int(end)
	}
	k.big[string(key)] = struct{}{}
	return true
}
