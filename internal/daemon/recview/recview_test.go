package recview

import (
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBytes(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		max  int
		want Data
		str  string
	}{
		{"null", nil, 10, Data{Null: true}, "null"},
		{"empty", []byte{}, 10, Data{}, ""},
		{"text", []byte("héllo"), 0, Data{Text: "héllo", Len: 6}, "héllo"},
		{"text cut", []byte("hello world"), 5, Data{Text: "hello", Len: 11, Cut: true}, "hello…(11 bytes)"},
		// "é" is two bytes: a cut after its first byte keeps it out.
		{"cut inside a character", []byte("hé!"), 2, Data{Text: "h", Len: 4, Cut: true}, "h…(4 bytes)"},
		{"binary", []byte{0xff, 0x00, 0x01}, 0, Data{Base64: "/wAB", Len: 3}, "base64:/wAB"},
		{"binary cut", []byte{0xff, 0x00, 0x01, 0x02}, 2, Data{Base64: "/wA=", Len: 4, Cut: true}, "base64:/wA=…(4 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Bytes(tt.in, tt.max)
			if got != tt.want {
				t.Fatalf("Bytes = %+v, want %+v", got, tt.want)
			}
			if s := got.String(); s != tt.str {
				t.Fatalf("String = %q, want %q", s, tt.str)
			}
		})
	}
}

func FuzzBytes(f *testing.F) {
	f.Add([]byte("hé!"), 2)
	f.Add([]byte{0xff, 0xfe}, 1)
	f.Fuzz(func(t *testing.T, b []byte, max int) {
		max = max % 64
		if max < 0 {
			max = -max
		}
		d := Bytes(b, max)
		if d.Len != len(b) || d.Cut != (max > 0 && len(b) > max) {
			t.Fatalf("len %d cut %v for %d bytes, max %d", d.Len, d.Cut, len(b), max)
		}
		shown := []byte(d.Text)
		if d.Base64 != "" {
			var err error
			if shown, err = base64.StdEncoding.DecodeString(d.Base64); err != nil {
				t.Fatal(err)
			}
		} else if !utf8.ValidString(d.Text) {
			t.Fatalf("text %q is not UTF-8", d.Text)
		}
		if max > 0 && len(shown) > max || !strings.HasPrefix(string(b), string(shown)) {
			t.Fatalf("shows %q of %q (max %d)", shown, b, max)
		}
	})
}
