package ordersdowngrade_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/record"
)

// classes are the kinds of byte a string scanner must tell apart: the bytes
// around each special range (controls, '"', '\', DEL, the non-ASCII lead and
// continuation bytes), whole UTF-8 characters of 2-4 bytes, and escapes.
var classes = []string{
	"\x00", "\x01", "\x1f", " ", "!", "\"", "#", "[", "\\", "]", "~", "\x7f",
	"\x80", "\xbf", "\xc0", "\xc2", "\xe2\x82", "\xf0\x9f\x98", "\xff",
	"é", "€", "😀", `\n`, `\"`, `\\`, `\u0041`, `\ud83d\ude00`, `\x`, `\u12`,
}

// placements put a string body s in each place the plugin scans one: the
// three kept strings (order_id well inside the value, currency ending 2
// bytes before the value's end, customer.id inside the nested object), an
// object key, a skipped string at the value's end and in customer, an
// element of a skipped array, and a value that ends inside the string
// (shorter and longer than 16 bytes: unterminated).
var placements = []func(s string) string{
	func(s string) string {
		return `{"order_id":"` + s + `","customer":{"id":"c"},"amount_cents":1,"currency":"EUR"}`
	},
	func(s string) string {
		return `{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"` + s + `"}`
	},
	func(s string) string {
		return `{"order_id":"o","customer":{"id":"` + s + `","n":1},"amount_cents":1,"currency":"E"}`
	},
	func(s string) string {
		return `{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","` + s + `":1}`
	},
	func(s string) string {
		return `{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","x":"` + s + `"}`
	},
	func(s string) string {
		return `{"order_id":"o","customer":{"id":"c","n":"` + s + `"},"amount_cents":1,"currency":"E"}`
	},
	func(s string) string {
		return `{"order_id":"o","customer":{"id":"c"},"t":["a","` + s + `"],"amount_cents":1,"currency":"E"}`
	},
	func(s string) string { return `{"` + s },
	func(s string) string {
		return `{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","x":"` + s
	},
}

// TestEveryPosition checks the plugin's string scanning against the Go
// reference with each byte class at every position 0-39 of a string, with
// 0-19 plain bytes after it: so the class falls in the first, second and
// third 16-byte block, on each side of their boundaries, and in the last
// block of the value, which the scanner reads as the 16 bytes ending at the
// value's end.
func TestEveryPosition(t *testing.T) {
	tr := open(t)
	var recs []record.Record
	for _, place := range placements {
		for _, c := range classes {
			for k := range 40 {
				for tail := range 20 {
					s := strings.Repeat("a", k) + c + strings.Repeat("b", tail)
					recs = append(recs, record.Record{Key: []byte("k"), Value: []byte(place(s)), Timestamp: time.UnixMilli(1)})
				}
			}
		}
	}
	const batch = 1000
	for i := 0; i < len(recs); i += batch {
		part := recs[i:min(i+batch, len(recs))]
		res, err := tr.Transform(context.Background(), part)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(part) {
			t.Fatalf("%d results for %d records", len(res), len(part))
		}
		for j := range part {
			compare(t, part[j], res[j])
		}
	}
}

// TestOutputRecords checks the output record, which the plugin writes with
// one reservation and raw stores, against the Go reference: keys of every
// length 0-40 and around 256 (where the SDK's putBytes turns to
// memory.copy) and null; headers none, copied in one piece (no
// fluid-schema-version among them) or one by one around a
// fluid-schema-version in each place, with values of those lengths, null
// and empty; and kept strings of every length 0-40, escaped or not.
func TestOutputRecords(t *testing.T) {
	tr := open(t)
	lengths := []int{255, 256, 257, 300}
	for n := range 41 {
		lengths = append(lengths, n)
	}
	bytesOf := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7) + seed
		}
		return b
	}
	schema := record.Header{Key: "fluid-schema-version", Value: []byte("2")}
	var recs []record.Record
	for _, n := range lengths {
		s := strings.Repeat("x", n%41)
		value := []byte(`{"order_id":"` + s + `","customer":{"id":"` + s + `\n"},"amount_cents":-` + fmt.Sprint(n) + `,"currency":"` + s + `"}`)
		hs := []record.Header{{Key: "v", Value: bytesOf(n, 3)}, {Key: strings.Repeat("k", n%41)}, {Key: "e", Value: []byte{}}}
		for i, key := range [][]byte{nil, bytesOf(n, 1)} {
			for place := -2; place <= len(hs); place++ {
				var h []record.Header
				switch place {
				case -2: // no headers
				case -1: // none is the schema header
					h = hs
				default:
					h = append(append(append([]record.Header{}, hs[:place]...), schema), hs[place:]...)
				}
				recs = append(recs, record.Record{Key: key, Value: value, Headers: h, Timestamp: time.UnixMilli(1700000000000 + int64(n*10+i))})
			}
		}
	}
	res, err := tr.Transform(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	for i := range recs {
		compare(t, recs[i], res[i])
	}
}

// TestAmounts checks amount_cents, read in one pass in its common form (its
// digits counted 16 bytes at a time when 16 bytes are left) and copied from
// the input to the output, against the Go reference: every digit count 1-21
// (around int64's and uint64's limits, and 16 bytes), signs, -0, leading
// zeros, fractions and exponents after each form, and what follows (the
// bytes next to the digits, '/' and ':', and 0x80; 16 bytes or fewer to the
// value's end).
func TestAmounts(t *testing.T) {
	tr := open(t)
	lits := []string{"0", "-0", "00", "-00", "01", "-01", "0.5", "-0.0", "0e1", "0E1", "1e5", "1E+5", "-1e-5", "-", "-a", "+1", ".5",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "18446744073709551616", "99999999999999999999", "184467440737095516150",
		"1.", "1.e5", "1e", "12345678901234567890.5", "true", `"1"`, "[1]", "null"}
	for n := 1; n <= 21; n++ {
		d := strings.Repeat("9", n)
		lits = append(lits, d, "-"+d, "1"+strings.Repeat("0", n-1), d+".0", d+"e0", d+"E0", "-"+d+".5")
	}
	var recs []record.Record
	for _, lit := range lits {
		for _, after := range []string{`,"currency":"E"}`, ` ,"currency":"E"}`, `/,"currency":"E"}`, `:,"currency":"E"}`, "\x80,\"currency\":\"E\"}", `}`, `0}`, `x}`} {
			v := `{"order_id":"o","customer":{"id":"c"},"currency":"E","amount_cents":` + lit + after
			if strings.Contains(after, "currency") {
				v = `{"order_id":"o","customer":{"id":"c"},"amount_cents":` + lit + after
			}
			recs = append(recs, record.Record{Key: []byte("k"), Value: []byte(v), Timestamp: time.UnixMilli(1)})
			recs = append(recs, record.Record{Key: []byte("k"), Value: []byte(v[:len(v)-1])})
		}
	}
	res, err := tr.Transform(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	for i := range recs {
		compare(t, recs[i], res[i])
	}
}

// TestDuplicateKeys checks duplicate keys, which the plugin finds by bits
// for the known keys and in a key set (searched inline up to 8 keys, then
// hashed) for the others, against the Go reference: 1-12 other keys at top
// level and in customer, each repeated at each later place, with and
// without escapes, and the known keys repeated.
func TestDuplicateKeys(t *testing.T) {
	tr := open(t)
	var recs []record.Record
	add := func(v string) {
		recs = append(recs, record.Record{Key: []byte("k"), Value: []byte(v), Timestamp: time.UnixMilli(1)})
	}
	for n := 1; n <= 12; n++ {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf(`"k%d"`, i)
		}
		for dup := -1; dup < n; dup++ {
			for at := 0; at <= n; at++ {
				ks := append([]string{}, keys...)
				if dup >= 0 {
					d := keys[dup]
					if at%2 == 1 {
						d = `"\u006b` + d[2:] // the same key, escaped
					}
					ks = append(ks[:at], append([]string{d}, ks[at:]...)...)
				}
				members := strings.Join(ks, ":1,") + ":1"
				add(`{"order_id":"o",` + members + `,"customer":{"id":"c"},"amount_cents":1,"currency":"E"}`)
				add(`{"order_id":"o","customer":{"id":"c",` + members + `},"amount_cents":1,"currency":"E"}`)
			}
		}
	}
	for _, k := range []string{`"order_id":"p"`, `"customer":{"id":"d"}`, `"amount_cents":2`, `"currency":"F"`, `"order\u005fid":"p"`} {
		add(`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E",` + k + `}`)
	}
	add(`{"order_id":"o","customer":{"id":"c","id":"d"},"amount_cents":1,"currency":"E"}`)
	add(`{"order_id":"o","customer":{"id":"c","\u0069d":"d"},"amount_cents":1,"currency":"E"}`)
	res, err := tr.Transform(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	for i := range recs {
		compare(t, recs[i], res[i])
	}
}

// TestSkippedValues checks the values of members nobody wants, which the
// plugin reads with strings and arrays inline (skip, and string elements in
// array), against the Go reference: each kind of JSON value, valid and
// broken, with whitespace around it, at top level and in customer, as
// itself and as an array element, and arrays nested 60-66 deep (the
// nesting limit is 64 levels, counted from the top-level object).
func TestSkippedValues(t *testing.T) {
	tr := open(t)
	vals := []string{`""`, `"a"`, `"0123456789abcdef0123456789"`, `"\n"`, `"é"`, `"a`, `"\x"`, "\"\x01\"",
		`[]`, `[ ]`, `["a"]`, `[ "a" , "b" ]`, `["a","b","c"]`, `["a",1,true,null,{},[],{"k":"v"},["x"]]`, `[1,"a"]`,
		`["a"`, `["a",]`, `[,"a"]`, `["a" "b"]`, `["a";"b"]`, `["a`, `[`, `["\x"]`, "[\"\x01\"]", `[tru]`, `[-]`,
		`1`, `-1.5e3`, `true`, `false`, `null`, `{}`, `{"a":["b"]}`, `{"a":"b"`, `tru`, `x`, `-`, ``, `]`, `}`}
	for n := 60; n <= 66; n++ {
		vals = append(vals, strings.Repeat("[", n)+strings.Repeat("]", n), strings.Repeat(`["a",`, n)+`"b"`+strings.Repeat("]", n))
	}
	var recs []record.Record
	add := func(v string) {
		recs = append(recs, record.Record{Key: []byte("k"), Value: []byte(v), Timestamp: time.UnixMilli(1)})
	}
	for _, v := range vals {
		for _, w := range []string{v, " " + v + " ", "\t\n" + v, "[" + v + "]", `[ "a", ` + v + ` ]`} {
			add(`{"order_id":"o","x":` + w + `,"customer":{"id":"c"},"amount_cents":1,"currency":"E"}`)
			add(`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","x":` + w + `}`)
			add(`{"order_id":"o","customer":{"id":"c","x":` + w + `},"amount_cents":1,"currency":"E"}`)
			add(`{"order_id":"o","customer":{"x":` + w + `,"id":"c"},"amount_cents":1,"currency":"E"}`)
			add(`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","x":` + w)
		}
	}
	res, err := tr.Transform(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	accepted := 0
	for i := range recs {
		compare(t, recs[i], res[i])
		if res[i].Err == nil {
			accepted++
		}
	}
	if accepted == 0 || accepted == len(recs) {
		t.Fatalf("%d of %d accepted: the cases do not tell accepting from rejecting", accepted, len(recs))
	}
}

// TestWhitespace checks whitespace between tokens, which the plugin skips
// with a test of one byte before any loop (every byte above 0x20 ends a
// run), against the Go reference: each of JSON's four whitespace bytes,
// runs of them, and the bytes next to them that are not whitespace (0x00,
// 0x0b, 0x0c, 0x1f, 0x21, 0x7f, 0x80), alone in each gap of an order that
// has every kind of token (keys, strings, numbers, literals, objects and
// arrays, empty and not, at each level), and in every gap at once.
func TestWhitespace(t *testing.T) {
	tr := open(t)
	tokens := []string{`{`, `"order_id"`, `:`, `"o"`, `,`, `"customer"`, `:`, `{`, `"id"`, `:`, `"c"`, `,`, `"n"`, `:`, `[`, `"a"`, `,`, `1`, `,`, `{`, `}`, `]`, `,`, `"m"`, `:`, `{`, `"k"`, `:`, `null`, `}`, `}`,
		`,`, `"amount_cents"`, `:`, `-12`, `,`, `"currency"`, `:`, `"E"`, `,`, `"x"`, `:`, `[`, `]`, `,`, `"y"`, `:`, `{`, `}`, `,`, `"z"`, `:`, `[`, `true`, `,`, `"s"`, `]`, `}`}
	runs := []string{"", " ", "\t", "\n", "\r", "  ", " \t\n\r", "\r\n\t ", "\x00", "\x0b", "\x0c", "\x1f", "\x21", "\x7f", "\x80", " \x0b", "\t!"}
	var recs []record.Record
	add := func(v string) {
		recs = append(recs, record.Record{Key: []byte("k"), Value: []byte(v), Timestamp: time.UnixMilli(1)})
	}
	for _, w := range runs {
		for gap := 0; gap <= len(tokens); gap++ {
			add(strings.Join(tokens[:gap], "") + w + strings.Join(tokens[gap:], ""))
		}
		add(w + strings.Join(tokens, w) + w)
	}
	res, err := tr.Transform(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	accepted := 0
	for i := range recs {
		compare(t, recs[i], res[i])
		if res[i].Err == nil {
			accepted++
		}
	}
	if accepted == 0 || accepted == len(recs) {
		t.Fatalf("%d of %d accepted: the cases do not tell accepting from rejecting", accepted, len(recs))
	}
}

// TestKeyLengths checks the comparison of keys other than the known ones
// (eqBytes: 8, 4 and 1 bytes at a time) against the Go reference: two keys
// of every length 0-40 that differ in one byte, at each position, or not at
// all (a duplicate), at top level and in customer.
func TestKeyLengths(t *testing.T) {
	tr := open(t)
	var recs []record.Record
	add := func(v string) {
		recs = append(recs, record.Record{Key: []byte("k"), Value: []byte(v), Timestamp: time.UnixMilli(1)})
	}
	for n := 0; n <= 40; n++ {
		a := make([]byte, n)
		for i := range a {
			a[i] = 'a' + byte(i%26)
		}
		for at := -1; at < n; at++ {
			b := append([]byte{}, a...)
			if at >= 0 {
				b[at] = 'Z'
			}
			pair := `"` + string(a) + `":1,"` + string(b) + `":2`
			add(`{"order_id":"o",` + pair + `,"customer":{"id":"c"},"amount_cents":1,"currency":"E"}`)
			add(`{"order_id":"o","customer":{"id":"c",` + pair + `},"amount_cents":1,"currency":"E"}`)
		}
	}
	res, err := tr.Transform(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	for i := range recs {
		compare(t, recs[i], res[i])
	}
}
