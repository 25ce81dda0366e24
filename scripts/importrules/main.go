// Command importrules checks the layers of streamd's layout
// (docs/architecture.md, "Layers"): which of the module's packages each
// package may import, read from `go list` over ./... . scripts/lint runs
// it; it prints one line per broken rule (the importing package, the
// import, the rule) and exits 1, or prints nothing and exits 0.
//
// A rule names the packages it covers (a path, or a folder followed by
// "/..." for the folder and everything under it) and either the only
// module packages their code may import (allow) or the module packages it
// must not import (deny). Code means a package's non-test files; tests
// (its _test.go files, in or out of the package) are held by the rules
// marked tests.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

const module = "github.com/streamd/streamd"

// rule is one layer rule. Paths are relative to the module root; "..."
// at the end of a path matches the folder and everything under it.
type rule struct {
	name  string   // what the rule protects, in words
	pkgs  []string // the packages it covers
	skip  []string // packages among pkgs it does not cover
	allow []string // if set: the only module packages they may import
	deny  []string // module packages (or other import paths) they must not import
	tests bool     // also hold the packages' tests to deny
}

// rules are the layers, from the innermost out.
var rules = []rule{
	{
		name:  "record is the data model: it imports nothing of streamd",
		pkgs:  []string{"record/..."},
		allow: []string{"record/..."},
	},
	{
		name:  "internal/x holds leaves: they import only each other and the data model",
		pkgs:  []string{"internal/x/..."},
		allow: []string{"internal/x/...", "record"},
	},
	{
		name:  "the engine and the built-in sources and sinks know plugins, records and leaves, nothing of Wasm, journals or the daemon",
		pkgs:  []string{"pipeline/..."},
		allow: []string{"pipeline/...", "plugins", "record/...", "internal/x/..."},
		deny:  []string{"github.com/tetratelabs/wazero/..."},
	},
	{
		name:  "the Wasm host knows plugins, records and leaves, nothing of pipelines or Kafka",
		pkgs:  []string{"runtime/..."},
		allow: []string{"runtime/...", "plugins", "record/...", "internal/x/...", "sdk/go/streamd/abi"},
		deny:  []string{"github.com/twmb/franz-go/pkg/kgo", "github.com/twmb/franz-go/pkg/kadm", "github.com/twmb/franz-go/pkg/kfake"},
	},
	{
		name: "plugin kinds know nothing of Kafka or of pipelines",
		pkgs: []string{"plugins/..."},
		deny: []string{"pipeline/...", "journal/...", "fluid/...", "github.com/twmb/franz-go/pkg/kgo",
			"github.com/twmb/franz-go/pkg/kadm", "github.com/twmb/franz-go/pkg/kfake"},
	},
	{
		name:  "journal and fluid build on pipeline, plugins, records and leaves",
		pkgs:  []string{"journal/...", "fluid/..."},
		allow: []string{"journal/...", "fluid/...", "pipeline/...", "plugins/...", "runtime/...", "record/...", "internal/x/..."},
	},
	{
		name: "the library never imports the daemon, the command line or the test suites",
		pkgs: []string{"record/...", "pipeline/...", "plugins/...", "runtime/...", "journal/...", "fluid/...",
			"proto/...", "sdk/...", "internal/x/..."},
		deny: []string{"internal/daemon/...", "internal/cli/...", "internal/tests/...", "cmd/..."},
	},
	{
		name: "the library's tests may use the test environment and a command's harness (plugins/native's conformance runs internal/cli/plugincli's), never the daemon",
		pkgs: []string{"record/...", "pipeline/...", "plugins/...", "runtime/...", "journal/...", "fluid/...",
			"proto/...", "sdk/...", "internal/x/..."},
		deny:  []string{"internal/daemon/...", "cmd/..."},
		tests: true,
	},
	{
		name:  "the config imports no server (admin, console, embedded broker, DLQ tools, the app): their defaults come from internal/daemon/defaults",
		pkgs:  []string{"internal/daemon/config"},
		allow: []string{"internal/daemon/config", "internal/daemon/defaults", "pipeline/...", "plugins/...", "fluid/...", "journal/...", "record/...", "internal/x/..."},
	},
	{
		name:  "internal/daemon/defaults is a leaf",
		pkgs:  []string{"internal/daemon/defaults"},
		allow: []string{},
	},
	{
		name: "the daemon never imports the command line (its tests may drive it with a command's client)",
		pkgs: []string{"internal/daemon/..."},
		deny: []string{"internal/cli/...", "cmd/..."},
	},
	{
		name: "only tests import the test suites and their environment",
		pkgs: []string{"..."},
		skip: []string{"internal/tests/...", "scripts/...", "examples/wasm/internal/guesttest"},
		deny: []string{"internal/tests/..."},
	},
	{
		name: "nothing imports a command",
		pkgs: []string{"..."},
		deny: []string{"cmd/..."},
	},
}

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// rel is p relative to the module ("" for the root), or p itself with
// ok false when it is outside the module.
func rel(p string) (string, bool) {
	if p == module {
		return "", true
	}
	if r, ok := strings.CutPrefix(p, module+"/"); ok {
		return r, true
	}
	return p, false
}

// match says whether path p (module-relative for a module package, the
// full import path otherwise) matches pattern pat.
func match(pat, p string) bool {
	if pat == "..." {
		return true
	}
	if dir, ok := strings.CutSuffix(pat, "/..."); ok {
		return p == dir || strings.HasPrefix(p, dir+"/")
	}
	return p == pat
}

func matchAny(pats []string, p string) bool {
	for _, pat := range pats {
		if match(pat, p) {
			return true
		}
	}
	return false
}

// check returns the broken rules of one package, one line each.
func check(rules []rule, p pkg) []string {
	self, ok := rel(p.ImportPath)
	if !ok {
		return nil
	}
	var out []string
	for _, r := range rules {
		if !matchAny(r.pkgs, self) || matchAny(r.skip, self) {
			continue
		}
		imports := p.Imports
		kind := "imports"
		if r.tests {
			imports = append(append(append([]string(nil), p.Imports...), p.TestImports...), p.XTestImports...)
			kind = "imports (code or tests)"
		}
		for _, imp := range imports {
			ri, inModule := rel(imp)
			if inModule && ri == self {
				continue // an external test package imports its own package
			}
			broken := matchAny(r.deny, ri)
			if inModule && r.allow != nil && !matchAny(r.allow, ri) {
				broken = true
			}
			if broken {
				out = append(out, fmt.Sprintf("%s %s %s: %s", self, kind, ri, r.name))
			}
		}
	}
	return out
}

func main() {
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "importrules:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "importrules:", err)
		os.Exit(2)
	}
	var broken []string
	dec := json.NewDecoder(out)
	n := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "importrules: go list:", err)
			os.Exit(2)
		}
		n++
		broken = append(broken, check(rules, p)...)
	}
	if err := cmd.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "importrules: go list:", err)
		os.Exit(2)
	}
	if n == 0 {
		fmt.Fprintln(os.Stderr, "importrules: go list found no package")
		os.Exit(2)
	}
	for _, b := range broken {
		fmt.Println(b)
	}
	if len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "importrules: %d imports break the layers (docs/architecture.md, \"Layers\")\n", len(broken))
		os.Exit(1)
	}
}
