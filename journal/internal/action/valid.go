package action

import (
	"encoding/binary"
	"math/bits"
)

// This file holds the package's JSON validator. Decoding validates every
// header and payload before picking fields out of them, and profiles showed
// encoding/json.Valid, which steps a scanner state machine through a
// function call per byte, at about half of the decode CPU.

// maxDepth is encoding/json's nesting limit: arrays and objects nested
// deeper than this are invalid.
const maxDepth = 10000

// valid reports whether b is one JSON value with optional surrounding
// whitespace, accepting exactly what encoding/json.Valid accepts. Like it,
// valid does not check that strings are UTF-8, nor that \u escapes pair
// surrogates; and it rejects nesting deeper than encoding/json's limit.
//
// It loops over b rather than recursing, so that deep input costs a bit
// per level instead of a stack frame, and it does not allocate.
func valid(b []byte) bool {
	// Documents nest a few levels: try with a stack of 256 first, so that
	// the common case does not pay for clearing one of maxDepth (1.2 KB).
	var small [4]uint64
	if ok, deep := scan(b, small[:]); !deep {
		return ok
	}
	return validDeep(b)
}

// validDeep is valid for input that nests deeper than valid's first try
// holds.
func validDeep(b []byte) bool {
	var objects [(maxDepth + 63) / 64]uint64
	ok, _ := scan(b, objects[:])
	return ok
}

// scan reports whether b is valid JSON, using objects as the stack of
// open containers: bit d set means the container d levels deep is an
// object. deep reports that b nests deeper than objects holds, and ok is
// then meaningless.
func scan(b []byte, objects []uint64) (ok, deep bool) {
	depth := 0
	i := skipWS(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false, false
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return false, false
			}
			if depth>>6 == len(objects) {
				return false, true
			}
			w, bit := depth>>6, uint64(1)<<(depth&63)
			depth++
			i = skipWS(b, i+1)
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
				return false, false
			}
			continue
		case '"':
			if i = scanString(b, i+1); i < 0 {
				return false, false
			}
		case 't':
			if !hasPrefix(b[i:], "true") {
				return false, false
			}
			i += 4
		case 'f':
			if !hasPrefix(b[i:], "false") {
				return false, false
			}
			i += 5
		case 'n':
			if !hasPrefix(b[i:], "null") {
				return false, false
			}
			i += 4
		default:
			if i = scanNumber(b, i); i < 0 {
				return false, false
			}
		}
		// A value ends at i: close containers until a comma starts the
		// next value.
		for {
			i = skipWS(b, i)
			if depth == 0 {
				return i == len(b), false
			}
			if i >= len(b) {
				return false, false
			}
			d := depth - 1
			inObject := objects[d>>6]&(1<<(d&63)) != 0
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
				if inObject {
					if i = scanKey(b, i); i < 0 {
						return false, false
					}
				}
			case '}':
				if !inObject {
					return false, false
				}
				depth--
				i++
				continue
			case ']':
				if inObject {
					return false, false
				}
				depth--
				i++
				continue
			default:
				return false, false
			}
			break
		}
	}
}

// scanKey skips an object's member name and the colon after it, starting at
// i, and returns the index where the member's value should start, or -1.
func scanKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = scanString(b, i+1); i < 0 {
		return -1
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipWS(b, i+1)
}

// scanString returns the index after the closing quote of the string whose
// contents start at i, or -1 if the string is unterminated or has a control
// character or a bad escape.
func scanString(b []byte, i int) int {
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

// scanNumber returns the index after the number starting at i, or -1 if
// there is none: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. What
// follows the number is the caller's to check, so "01" is 0 followed by
// a stray 1.
func scanNumber(b []byte, i int) int {
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
