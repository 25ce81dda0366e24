package termsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, ünïcödé ✓", "plain text, ünïcödé ✓"},
		{"a\x1b[2Jb", `a\x1b[2Jb`},
		{"\x1b]0;PWNED\x07", `\x1b]0;PWNED\x07`},
		{"line\r\nforged\ttab", `line\x0d\x0aforged\x09tab`},
		{"del\x7f", `del\x7f`},
		{"csi\u009b31m", `csi\u009b31m`},
		{"rlo\u202eevil", `rlo\u202eevil`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"", ""},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWriterKeepsJSON(t *testing.T) {
	v := map[string]string{"k": "a\x1b[2J\u009b31m\u202eb\x7f\r\n"}
	b, _ := json.Marshal(v)
	raw := append(b, []byte(`{"raw":"`+"\u009b\u202e"+`"}`+"\n")...)
	for cut := 0; cut <= len(raw); cut++ { // a character cut between writes
		var out bytes.Buffer
		w := NewWriter(&out)
		if _, err := w.Write(raw[:cut]); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(raw[cut:]); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		for _, c := range []string{"\x1b", "\u009b", "\u202e", "\x7f"} {
			if strings.Contains(s, c) {
				t.Fatalf("cut at %d: %q in %q", cut, c, s)
			}
		}
		dec := json.NewDecoder(strings.NewReader(s))
		var got map[string]string
		if err := dec.Decode(&got); err != nil || got["k"] != v["k"] {
			t.Fatalf("cut at %d: %q: %v %q", cut, s, err, got)
		}
		if err := dec.Decode(&got); err != nil || got["raw"] != "\u009b\u202e" {
			t.Fatalf("cut at %d: second value %q: %v", cut, got, err)
		}
	}
}

func FuzzString(f *testing.F) {
	f.Add("a\x1b[2J\u009b\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if !utf8.ValidString(out) {
			t.Fatalf("String(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if escaped(r) {
				t.Fatalf("String(%q) = %q: has %U", s, out, r)
			}
		}
	})
}
