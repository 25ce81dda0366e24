package jsonscan

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validCases are inputs with the answer encoding/json.Valid gives; want is
// stated so that a case fails if Valid and encoding/json agree on a wrong
// answer.
func validCases() []struct {
	in   string
	want bool
} {
	deepArray := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObject := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	deepMixed := func(n int) string { // n levels, alternating; n even
		return strings.Repeat(`[{"k":`, n/2) + "0" + strings.Repeat("}]", n/2)
	}
	return []struct {
		in   string
		want bool
	}{
		// Empty and whitespace.
		{"", false},
		{" ", false},
		{" \t\r\n", false},
		{" \t\r\n1 \t\r\n", true},
		{"\f1", false},      // form feed is not JSON whitespace
		{"\v1", false},      // nor vertical tab
		{"\u00a01", false},  // nor NBSP
		{"\ufeff{}", false}, // nor a byte order mark

		// Literals.
		{"true", true},
		{"false", true},
		{"null", true},
		{"tru", false},
		{"nul", false},
		{"True", false},
		{"NULL", false},
		{"truex", false},
		{"nulll", false},
		{"truefalse", false},
		{"[true,false,null]", true},
		{"[truefalse]", false},

		// Numbers.
		{"0", true},
		{"-0", true},
		{"123", true},
		{"-123", true},
		{"01", false},
		{"-01", false},
		{"00", false},
		{"-", false},
		{"+1", false},
		{"--1", false},
		{"1.", false},
		{"1.e5", false},
		{".5", false},
		{"-.5", false},
		{"0.5", true},
		{"1.25", true},
		{"1e", false},
		{"1e+", false},
		{"1e-", false},
		{"1E5", true},
		{"1e+5", true},
		{"1e-5", true},
		{"1.5e-05", true},
		{"1e5.5", false},
		{"1ee5", false},
		{"1e99999999999999999999", true},
		{"-1E+9999999", true},
		{"123456789012345678901234567890123456789", true},
		{"0x10", false},
		{"Infinity", false},
		{"NaN", false},
		{"1 2", false},
		{"[1 2]", false},
		{"[-]", false},
		{"[1.]", false},
		{"[0,-0,1e1,2.5E-3]", true},
		{"1-", false},

		// Strings and escapes.
		{`""`, true},
		{`"abc"`, true},
		{`"`, false},
		{`"abc`, false},
		{`"\"\\\/\b\f\n\r\t"`, true},
		{`"\u0041\u00e9\uFFFF\uabCD"`, true},
		{`"\a"`, false},
		{`"\'"`, false},
		{`"\x41"`, false},
		{`"\0"`, false},
		{`"\U0041"`, false},
		{`"\u"`, false},
		{`"\u12"`, false},
		{`"\u123"`, false},
		{`"\u123g"`, false},
		{`"\u00zz"`, false},
		{`"\u 123"`, false},
		{`"\`, false},
		{`"\"`, false},
		{`"\\"`, true},
		{`"\ud800"`, true},       // lone high surrogate
		{`"\udc00"`, true},       // lone low surrogate
		{`"\udc00\ud800"`, true}, // reversed pair
		{`"\ud83d\ude00"`, true}, // a pair
		{"\"a\x00b\"", false},    // raw control characters
		{"\"a\nb\"", false},
		{"\"a\tb\"", false},
		{"\"\x1f\"", false},
		{"\"\x7f\"", true}, // DEL is not a control character to JSON
		{"\"ünïcode €\"", true},
		{"\"\xff\"", true},         // invalid UTF-8 is accepted in strings
		{"\"\xc3\"", true},         // truncated sequence
		{"\"\xed\xa0\x80\"", true}, // UTF-8-encoded surrogate
		{"\"\xc0\xaf\"", true},     // overlong
		{"\xff", false},            // but not outside them
		{"[1]\xff", false},
		{"\xef\xbb\xbf1", false},
		{"'a'", false},

		// Trailing garbage and several values.
		{"{}x", false},
		{"{} {}", false},
		{"[] []", false},
		{"1,2", false},
		{`"a""b"`, false},
		{"{}}", false},
		{"[]]", false},
		{"1\x00", false},
		{"\x00", false},

		// Arrays.
		{"[]", true},
		{"[ ]", true},
		{"[1,2,3]", true},
		{"[ 1 , 2 ]", true},
		{"[", false},
		{"]", false},
		{"[1", false},
		{"[1,", false},
		{"[1,]", false},
		{"[,1]", false},
		{"[,]", false},
		{"[1,,2]", false},
		{"[1:2]", false},
		{"[}", false},
		{"[[]", false},
		{"[[],[[]],{}]", true},

		// Objects.
		{"{}", true},
		{"{ }", true},
		{`{"a":1}`, true},
		{` { "a" : 1 , "b" : [ ] } `, true},
		{`{"a":1,"a":2}`, true}, // duplicate names are not checked
		{"{", false},
		{"}", false},
		{`{"a"}`, false},
		{`{"a":}`, false},
		{`{"a" 1}`, false},
		{`{"a"::1}`, false},
		{`{"a":1,}`, false},
		{`{,"a":1}`, false},
		{`{"a":1 "b":2}`, false},
		{`{"a":1;"b":2}`, false},
		{`{"a":1,,"b":2}`, false},
		{`{1:2}`, false},
		{`{null:2}`, false},
		{`{a:1}`, false},
		{`{'a':1}`, false},
		{`{[]:1}`, false},
		{`{"a":1]`, false},
		{`{"a"`, false},
		{`{"a":`, false},
		{`{"a":1`, false},
		{`{"a\u0000":1}`, true},
		{"{\"a\x01\":1}", false},

		// Nesting: encoding/json allows 10,000 levels.
		{deepArray(100), true},
		{deepArray(256), true}, // valid's first try holds 256 levels
		{deepArray(257), true},
		{deepObject(300), true},
		{strings.Repeat("[", 300) + strings.Repeat("]", 299) + "}", false},
		{strings.Repeat("[", 256) + `{"a":1]` + strings.Repeat("]", 256), false},
		{strings.Repeat("[", 300) + "x", false},
		{deepArray(MaxDepth), true},
		{deepArray(MaxDepth + 1), false},
		{deepObject(MaxDepth), true},
		{deepObject(MaxDepth + 1), false},
		{deepMixed(MaxDepth), true},
		{deepMixed(MaxDepth + 2), false},
		{strings.Repeat("[", MaxDepth), false},
		{strings.Repeat("[", MaxDepth+1), false},
		{strings.Repeat("[", 64) + strings.Repeat("]", 63) + "}", false},
		{strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 63) + "]", false},
		{deepArray(MaxDepth) + " ", true},
		{"[" + deepArray(MaxDepth-1) + "," + deepObject(MaxDepth-1) + "]", true},
	}
}

func TestValid(t *testing.T) {
	for _, tt := range validCases() {
		name := tt.in
		if len(name) > 40 {
			name = fmt.Sprintf("%.40s...(%d bytes)", name, len(name))
		}
		if std := json.Valid([]byte(tt.in)); std != tt.want {
			t.Errorf("encoding/json.Valid(%q) = %v, the table says %v", name, std, tt.want)
		}
		if got := Valid([]byte(tt.in)); got != tt.want {
			t.Errorf("Valid(%q) = %v, want %v", name, got, tt.want)
		}
	}
}

func TestValidAllocs(t *testing.T) {
	in := []byte(`{"events":[{"seqNr":1,"tags":["a"],"payload":{"x":[1.5e3,true,null,"\u00e9"]}}]}`)
	if n := testing.AllocsPerRun(100, func() { Valid(in) }); n != 0 {
		t.Errorf("Valid allocates %v times per call", n)
	}
}

func FuzzValid(f *testing.F) {
	for _, tt := range validCases() {
		f.Add([]byte(tt.in))
	}
	// The journal's action headers and payloads, its main input.
	files, _ := filepath.Glob("../../../journal/internal/action/testdata/*")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && !strings.HasSuffix(p, ".py") {
			f.Add(b)
		}
	}
	f.Add(benchAppendPayload(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json.Valid says %v", b, got, want)
		}
		// Value stops right after the first value, which must then be
		// valid on its own.
		start := SkipWS(b, 0)
		if end := Value(b, start, MaxDepth); end >= 0 && !json.Valid(b[start:end]) {
			t.Fatalf("Value(%q) = %d, but %q is not valid JSON", b, end, b[start:end])
		}
		// In valid text, Skip finds the end that Value finds.
		if Valid(b) {
			if got, want := Skip(b, start), Value(b, start, MaxDepth); got != want {
				t.Fatalf("Skip(%q, %d) = %d, Value says %d", b, start, got, want)
			}
		}
	})
}

// benchAppendPayload is a json-format Append of 10 events as
// journal.Append writes them (compare journal/internal/action/testdata).
func benchAppendPayload(testing.TB) []byte {
	b := []byte(`{"events":[`)
	for seq := 1; seq <= 10; seq++ {
		if seq > 1 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"seqNr":%d,"tags":["order"],"payloadType":"json","payload":{"order":"o-17","seq":%d,"amount":12.5,"currency":"EUR","items":["sku-1","sku-2"]}}`, seq, seq)
	}
	return append(b, `],"metadata":{}}`...)
}

// benchObject is a JSON object of about 4 KB of string and number members.
func benchObject() []byte {
	b := []byte{'{'}
	for i := 0; len(b) < 4000; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		if i%2 == 0 {
			b = fmt.Appendf(b, `"name_%d":"customer %d, street %d \"north\"\n"`, i, i*7, i%100)
		} else {
			b = fmt.Appendf(b, `"amount_%d":%d.%02de-%d`, i, i*12345, i%100, i%5)
		}
	}
	return append(b, '}')
}

// BenchmarkValid compares Valid with encoding/json.Valid on a json-format
// Append of 10 events, a 4 KB object of strings and numbers, and an Append
// header.
func BenchmarkValid(b *testing.B) {
	inputs := []struct {
		name string
		in   []byte
	}{
		{"append10", benchAppendPayload(b)},
		{"object4k", benchObject()},
		{"header", []byte(`{"append":{"range":{"from":41,"to":50},"origin":"bench","version":"4.1.0","payloadType":"json","metadata":{}}}`)},
	}
	for _, in := range inputs {
		if !json.Valid(in.in) || !Valid(in.in) {
			b.Fatalf("%s: input is not valid JSON", in.name)
		}
		b.Run(in.name+"/jsonscan", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			for b.Loop() {
				Valid(in.in)
			}
		})
		b.Run(in.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			for b.Loop() {
				json.Valid(in.in)
			}
		})
	}
}

func TestValue(t *testing.T) {
	for _, tt := range []struct {
		in           string
		at, maxDepth int
		want         int
	}{
		{`{"a":1} tail`, 0, MaxDepth, 7},
		{`x [1,[2]],`, 2, MaxDepth, 9},
		{`[[[1]]]`, 0, 3, 7},
		{`[[[1]]]`, 0, 2, -1},
		{`"s"`, 0, 0, 3},
		{`[]`, 0, 0, -1},
		{`{"a":}`, 0, MaxDepth, -1},
		{`12.5e3,`, 0, MaxDepth, 6},
		{`tru`, 0, MaxDepth, -1},
		{``, 0, MaxDepth, -1},
	} {
		if got := Value([]byte(tt.in), tt.at, tt.maxDepth); got != tt.want {
			t.Errorf("Value(%q, %d, %d) = %d, want %d", tt.in, tt.at, tt.maxDepth, got, tt.want)
		}
	}
}

func TestSkip(t *testing.T) {
	for _, tt := range []struct {
		in   string
		at   int
		want int
	}{
		{`{"a":1} tail`, 0, 7},
		{`x [1,[2]],`, 2, 9},
		{`"s"`, 0, 3},
		{`"a\"b",1`, 0, 6},
		{`"a\\",1`, 0, 5},
		{`"a\\\"b"`, 0, 8},
		{`{"k":"}\"]","l":[{}]}x`, 0, 21},
		{`[["]"],"[",{"}":{}}]`, 0, 20},
		{`12.5e3,`, 0, 6},
		{`-1}`, 0, 2},
		{`true ]`, 0, 4},
		{`null`, 0, 4},
		{`[1, 2]`, 6, 6},
	} {
		if got := Skip([]byte(tt.in), tt.at); got != tt.want {
			t.Errorf("Skip(%q, %d) = %d, want %d", tt.in, tt.at, got, tt.want)
		}
	}
	for _, tt := range validCases() {
		b := []byte(tt.in)
		if start := SkipWS(b, 0); tt.want {
			if got, want := Skip(b, start), Value(b, start, MaxDepth); got != want {
				t.Errorf("Skip(%.40q, %d) = %d, Value says %d", b, start, got, want)
			}
		}
	}
}

func TestStringNumber(t *testing.T) {
	for _, tt := range []struct {
		in   string
		at   int
		f    func([]byte, int) int
		want int
	}{
		{`"ab\"c" x`, 0, String, 7},
		{`x"\u00e9"`, 1, String, 9},
		{`"a`, 0, String, -1},
		{`a"`, 0, String, -1},
		{"\"\x01\"", 0, String, -1},
		{`"\q"`, 0, String, -1},
		{`-0.5e-3]`, 0, Number, 7},
		{`01`, 0, Number, 1},
		{`1.`, 0, Number, -1},
		{`-`, 0, Number, -1},
		{`.5`, 0, Number, -1},
	} {
		if got := tt.f([]byte(tt.in), tt.at); got != tt.want {
			t.Errorf("%q at %d: %d, want %d", tt.in, tt.at, got, tt.want)
		}
	}
}

// plainRef is Plain one byte at a time.
func plainRef(s []byte) int {
	for i, c := range s {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
	}
	return len(s)
}

func TestPlainString(t *testing.T) {
	for _, tt := range []struct {
		in    string
		end   int
		plain bool
	}{
		{`"abc"`, 5, true},
		{`""`, 2, true},
		{`"0123456789abcdef0123"x`, 22, true},
		{`"a\"b"`, 6, false},
		{`"0123456789\n"`, 14, false},
		{`"é"`, 4, false},
		{`"01234567é"`, 12, false},
		{"\"a\x01\"", -1, false},
		{`"abc`, -1, false},
		{`"0123456789abcdef`, -1, false},
		{`abc"`, -1, false},
	} {
		end, plain := PlainString([]byte(tt.in), 0)
		if end != tt.end || plain != tt.plain {
			t.Errorf("PlainString(%q) = %d, %v; want %d, %v", tt.in, end, plain, tt.end, tt.plain)
		}
	}
}

// FuzzPlain: Plain agrees with a byte-at-a-time loop, and PlainString ends
// where String does and calls plain exactly the strings whose bytes are
// their text.
func FuzzPlain(f *testing.F) {
	f.Add([]byte(`"abc"`))
	f.Add([]byte(`"0123456789abcdef\"x"`))
	f.Add([]byte("\"0123456\x80\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Plain(b), plainRef(b); got != want {
			t.Fatalf("Plain(%q) = %d, want %d", b, got, want)
		}
		end, plain := PlainString(b, 0)
		if want := String(b, 0); end != want {
			t.Fatalf("PlainString(%q) ends at %d, String at %d", b, end, want)
		}
		if plain != (end > 0 && plainRef(b[1:end-1]) == end-2) {
			t.Fatalf("PlainString(%q) plain = %v", b, plain)
		}
	})
}
