package admin

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRedactJSON(t *testing.T) {
	f := func(s string) string { return strings.ReplaceAll(s, "secret", "<from ${S}>") }
	for _, tc := range []struct{ in, want string }{
		{`{"a":"x secret y","secret":1,"b":["secret",2,{"c":"no"}]}`, `{"a":"x \u003cfrom ${S}\u003e y","secret":1,"b":["\u003cfrom ${S}\u003e",2,{"c":"no"}]}`},
		{`{"e": "say \"secret\" here"}`, `{"e": "say \"\u003cfrom ${S}\u003e\" here"}`},
		{`"secret"`, `"\u003cfrom ${S}\u003e"`},
		{`{"k" : "v", "n": null}`, `{"k" : "v", "n": null}`},
	} {
		got := string(RedactJSON([]byte(tc.in), f))
		if got != tc.want || !json.Valid([]byte(got)) {
			t.Errorf("RedactJSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func FuzzRedactJSON(f *testing.F) {
	f.Add([]byte(`{"a":"secret","b":["x\"secret",1.5e3,true]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		out := RedactJSON(b, func(s string) string { return strings.ReplaceAll(s, "e", "<\"\\e>") })
		if !json.Valid(out) {
			t.Fatalf("RedactJSON(%q) = %q: not JSON", b, out)
		}
	})
}
