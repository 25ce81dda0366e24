package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// MaxDepth is encoding/json's nesting limit: arrays and objects nested
// deeper than this are invalid.
const MaxDepth = 10000

// Valid reports whether b is one JSON value with optional surrounding
// whitespace, accepting exactly what encoding/json.Valid accepts. Like it,
// Valid does not check that strings are UTF-8, nor that \u escapes pair
// surrogates; and it rejects nesting deeper than MaxDepth.
//
// It loops over b rather than recursing, so that deep input costs a bit
// per level instead of a stack frame, and it does not allocate.
func Valid(b []byte) bool {
	end := Value(b, SkipWS(b, 0), MaxDepth)
	return end >= 0 && SkipWS(b, end) == len(b)
}

// Value returns the index just after the JSON value that starts at b[i],
// or -1 if there is none there or it nests arrays and objects more than
// maxDepth deep (at most MaxDepth). What follows the value is the
// caller's to check.
func Value(b []byte, i, maxDepth int) int {
	maxDepth = min(maxDepth, MaxDepth)
	// Documents nest a few levels: try with a stack of 256 first, so that
	// the common case does not pay for clearing one of MaxDepth (1.2 KB).
	var small [4]uint64
	if end, deep := scan(b, i, maxDepth, small[:]); !deep {
		return end
	}
	return valueDeep(b, i, maxDepth)
}

// valueDeep is Value for input that nests deeper than its first try
// holds.
func valueDeep(b []byte, i, maxDepth int) int {
	var objects [(MaxDepth + 63) / 64]uint64
	end, _ := scan(b, i, maxDepth, objects[:])
	return end
}

// scan is Value, using objects as the stack of open containers: bit d set
// means the container d levels deep is an object. deep reports that the
// value nests deeper than objects holds, and end is then meaningless.
func scan(b []byte, i, maxDepth int, objects []uint64) (end int, deep bool) {
	depth := 0
	for {
		// A value starts at i.
		if i >= len(b) {
			return -1, false
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return -1, false
			}
			if depth>>6 == len(objects) {
				return -1, true
			}
			w, bit := depth>>6, uint64(1)<<(depth&63)
			depth++
			i = SkipWS(b, i+1)
			if c == '[' {
				objects[w] &^= bit
				if i < len(b) && b[i] == ']' {
					depth--
					i++
					break
				}
				continue
			}
			objects[w] |= bit
			if i < len(b) && b[i] == '}' {
				depth--
				i++
				break
			}
			if i = scanKey(b, i); i < 0 {
				return -1, false
			}
			continue
		case '"':
			if i = String(b, i); i < 0 {
				return -1, false
			}
		case 't':
			if !hasPrefix(b[i:], "true") {
				return -1, false
			}
			i += 4
		case 'f':
			if !hasPrefix(b[i:], "false") {
				return -1, false
			}
			i += 5
		case 'n':
			if !hasPrefix(b[i:], "null") {
				return -1, false
			}
			i += 4
		default:
			if i = Number(b, i); i < 0 {
				return -1, false
			}
		}
		// A value ends at i: close containers until a comma starts the
		// next value.
		for {
			if depth == 0 {
				return i, false
			}
			i = SkipWS(b, i)
			if i >= len(b) {
				return -1, false
			}
			d := depth - 1
			inObject := objects[d>>6]&(1<<(d&63)) != 0
			switch b[i] {
			case ',':
				i = SkipWS(b, i+1)
				if inObject {
					if i = scanKey(b, i); i < 0 {
						return -1, false
					}
				}
			case '}':
				if !inObject {
					return -1, false
				}
				depth--
				i++
				continue
			case ']':
				if inObject {
					return -1, false
				}
				depth--
				i++
				continue
			default:
				return -1, false
			}
			break
		}
	}
}

// SkipWS returns the index of the first byte at or after b[i] that is not
// JSON whitespace (space, tab, newline, carriage return).
func SkipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanKey skips an object's member name and the colon after it, starting at
// i, and returns the index where the member's value should start, or -1.
func scanKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = String(b, i); i < 0 {
		return -1
	}
	i = SkipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return SkipWS(b, i+1)
}

// String returns the index just after the JSON string whose opening quote
// is b[i], or -1 if there is none there, or it is unterminated, or it has a
// control character or a bad escape.
func String(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	i++
	for {
		// Most string bytes are plain: skip 8 at a time up to the first
		// that may end the string or be invalid.
		for len(b)-i >= 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			if m := special(x); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(b) {
			return -1
		}
		c := b[i]
		i++
		switch {
		case c == '"':
			return i
		case c < 0x20:
			return -1
		case c == '\\':
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(b)-i < 5 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return -1
				}
				i += 5
			default:
				return -1
			}
		}
	}
}

// PlainString returns the index just after the JSON string whose opening
// quote is b[i], as String does, and whether the string is plain: ASCII
// without escapes, so that the bytes between its quotes are its text.
func PlainString(b []byte, i int) (end int, plain bool) {
	if i >= len(b) || b[i] != '"' {
		return -1, false
	}
	j := i + 1 + Plain(b[i+1:])
	if j < len(b) && b[j] == '"' {
		return j + 1, true
	}
	return String(b, i), false
}

// Plain returns the length of the longest prefix of s that a JSON string
// holds as it is: ASCII bytes other than control characters, '"' and '\'.
func Plain(s []byte) int {
	i := 0
	for len(s)-i >= 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		if m := (special(x) | x) & 0x8080808080808080; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(s) {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
		i++
	}
	return i
}

// special takes 8 string bytes in little-endian order and returns a mask
// with the top bit set of each byte that is a quote, a backslash or a
// control character. Borrows may also set bits above the first such byte,
// never below it, so only the lowest set bit is exact.
func special(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ ones*'"'
	backslash := x ^ ones*'\\'
	// For a byte v < n <= 0x80, v-n wraps to a byte with the top bit set;
	// &^ x drops the bytes >= 0x80, which had it set already. Quotes and
	// backslashes are the bytes that the xors make 0, that is < 1.
	return ((x - ones*0x20) | (quote - ones) | (backslash - ones)) &^ x & highs
}

// Number returns the index just after the number starting at b[i], or -1
// if there is none: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. What
// follows the number is the caller's to check, so "01" is 0 followed by
// a stray 1.
func Number(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = scanDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := scanDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := scanDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func scanDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hasPrefix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[:len(s)]) == s
}

// Skip returns the index just after the JSON value at b[i] (len(b) if i
// is past the end) of text known to be valid, such as a document that
// Valid or Value accepted once: it only finds the end, checking nothing on
// the way.
func Skip(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = SkipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// SkipString returns the index just after the JSON string whose opening
// quote is b[i], in text known to be valid (see Skip).
func SkipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		// An escaped quote has an odd number of backslashes before it.
		k := i - 1
		for k >= 0 && b[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			return i + 1
		}
		i++
	}
}
