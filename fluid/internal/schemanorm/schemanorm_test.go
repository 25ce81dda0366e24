package schemanorm

import (
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name  string
		a, b  string
		equal bool
	}{
		{"key order and space", `{"type":"object","required":["id"]}`, `{ "required" : ["id"], "type": "object" }`, true},
		{"annotations dropped", `{"type":"string","title":"A","description":"x","$comment":"c","examples":["q"]}`, `{"type":"string"}`, true},
		{"nested annotations", `{"properties":{"id":{"type":"integer","description":"the id"}}}`, `{"properties":{"id":{"type":"integer"}}}`, true},
		{"property named title kept", `{"properties":{"title":{"type":"string"}}}`, `{"properties":{}}`, false},
		{"numbers canonical", `{"maximum":10.0}`, `{"maximum":1e1}`, true},
		{"number differs", `{"maximum":10}`, `{"maximum":11}`, false},
		{"enum data kept", `{"enum":[{"title":"x"}]}`, `{"enum":[{}]}`, false},
		{"const data kept", `{"const":{"description":"d"}}`, `{"const":{}}`, false},
		{"array order matters", `{"required":["a","b"]}`, `{"required":["b","a"]}`, false},
		{"type change", `{"properties":{"total":{"type":"number"}}}`, `{"properties":{"total":{"type":"string"}}}`, false},
		{"items array", `{"prefixItems":[{"title":"t","type":"string"}]}`, `{"prefixItems":[{"type":"string"}]}`, true},
		{"defs", `{"$defs":{"a":{"title":"A","type":"string"}}}`, `{"$defs":{"a":{"type":"string"}}}`, true},
		{"draft4 dependencies array", `{"dependencies":{"a":["b"]}}`, `{"dependencies":{"a":["b"]}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			na, err := Normalize([]byte(tt.a))
			if err != nil {
				t.Fatal(err)
			}
			nb, err := Normalize([]byte(tt.b))
			if err != nil {
				t.Fatal(err)
			}
			if (string(na) == string(nb)) != tt.equal {
				t.Fatalf("equal=%v want %v:\n%s\n%s", string(na) == string(nb), tt.equal, na, nb)
			}
		})
	}
}

func TestNormalizeErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":1} {}`, `nope`} {
		if _, err := Normalize([]byte(in)); err == nil {
			t.Errorf("Normalize(%q): no error", in)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{`{"type":"object"}`, `{"properties":{"a":{"title":"x"}}}`, `[1,2.50,1e3]`, `true`, `{"enum":[null,"a",{"b":-0.1}]}`, `1e99999999999`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		n, err := Normalize(in)
		if err != nil {
			return
		}
		// Idempotent: normalising the canonical form changes nothing.
		n2, err := Normalize(n)
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", n, err)
		}
		if string(n) != string(n2) {
			t.Fatalf("not idempotent: %q -> %q", n, n2)
		}
	})
}
