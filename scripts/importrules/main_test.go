package main

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	cases := []struct {
		name string
		pkg  pkg
		want []string // substrings of the broken rules, in order
	}{
		{"config may import defaults and the library",
			pkg{ImportPath: m("internal/daemon/config"), Imports: []string{"fmt", m("internal/daemon/defaults"), m("pipeline/kafka"), m("plugins/codecs")}}, nil},
		{"config importing a server is refused",
			pkg{ImportPath: m("internal/daemon/config"), Imports: []string{m("internal/daemon/admin")}},
			[]string{"internal/daemon/config imports internal/daemon/admin: the config imports no server"}},
		{"record importing the engine is refused",
			pkg{ImportPath: m("record"), Imports: []string{"encoding/json", m("pipeline")}},
			[]string{"record imports pipeline: record is the data model"}},
		{"the engine importing wazero is refused (outside the module: a deny)",
			pkg{ImportPath: m("pipeline"), Imports: []string{"github.com/tetratelabs/wazero"}},
			[]string{"pipeline imports github.com/tetratelabs/wazero: the engine"}},
		{"a library test may use the test environment",
			pkg{ImportPath: m("pipeline/kafka"), TestImports: []string{m("internal/tests/testenv")}}, nil},
		{"a library test may not use the daemon",
			pkg{ImportPath: m("journal"), XTestImports: []string{m("internal/daemon/app")}},
			[]string{"journal imports (code or tests) internal/daemon/app"}},
		{"library code may not use the test environment",
			pkg{ImportPath: m("fluid"), Imports: []string{m("internal/tests/testenv")}},
			[]string{"fluid imports internal/tests/testenv: journal and fluid", "fluid imports internal/tests/testenv: the library never", "fluid imports internal/tests/testenv: only tests"}},
		{"an external test package imports its own package",
			pkg{ImportPath: m("record"), XTestImports: []string{m("record")}}, nil},
		{"outside the module: nothing checked",
			pkg{ImportPath: "example.com/x", Imports: []string{m("internal/daemon/app")}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := check(rules, c.pkg)
			if len(got) != len(c.want) {
				t.Fatalf("got %d broken rules %q, want %d %q", len(got), got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("broken rule %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
