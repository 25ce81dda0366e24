package load

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		ref, kind, path string
		err             bool
	}{
		{"wasm:a/b.wasm", "wasm", "a/b.wasm", false},
		{"native:./bin/p", "native", "./bin/p", false},
		{"x.wasm", "wasm", "x.wasm", false},
		{"./bin/p", "", "", true},
		{"native:", "", "", true},
	}
	for _, tt := range tests {
		k, p, err := Parse(tt.ref)
		if (err != nil) != tt.err || k != tt.kind || p != tt.path {
			t.Errorf("Parse(%q) = %q, %q, %v", tt.ref, k, p, err)
		}
	}
}
