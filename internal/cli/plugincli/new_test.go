package plugincli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/tests/testenv"
)

var buildStreamd = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(tmpRoot, "bin")
	out := filepath.Join(dir, "streamd")
	cmd := exec.Command("go", "build", "-o", out, "../../../cmd/streamd")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build streamd: %v\n%s", err, b)
	}
	return dir, nil
})

// toolsOf are the tools the project of a language needs (the README's).
var toolsOf = map[string][]string{
	"go":             {"go"},
	"rust":           {"cargo", "rustc"},
	"c":              {"clang", "wasm-ld"},
	"assemblyscript": {"node", "npm"},
	"wat":            {"wat2wasm"},
}

// TestNewProjects: for each language and kind,
// `streamd plugin new` then the two commands it prints, as printed, in a
// shell with the streamd built from this checkout on PATH: the plugin builds
// and its test passes. A broken expected output then fails the same test,
// so the test is not vacuous.
func TestNewProjects(t *testing.T) {
	bin, err := buildStreamd()
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := filepath.Abs("../../../sdk")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, lang := range plugincli.NewLanguages {
		t.Run(lang, func(t *testing.T) {
			for _, tool := range toolsOf[lang] {
				testenv.Tool(t, tool)
			}
			for _, kind := range plugincli.NewKinds {
				t.Run(kind, func(t *testing.T) {
					name := lang + "-" + kind
					var o, e bytes.Buffer
					code := plugincli.Main(context.Background(), []string{"new", "--lang", lang, "--kind", kind, "--sdk", sdk, "--dir", filepath.Join(root, name), name}, &o, &e, plugincli.OpenDefault)
					if code != 0 {
						t.Fatalf("plugin new: exit %d\n%s%s", code, o.String(), e.String())
					}
					lines := strings.Split(strings.TrimSpace(o.String()), "\n")
					if len(lines) != 4 || lines[1] != "build it and run its test:" {
						t.Fatalf("plugin new printed:\n%s", o.String())
					}
					build, test := strings.TrimSpace(lines[2]), strings.TrimSpace(lines[3])
					if !strings.HasPrefix(test, "streamd plugin test ") {
						t.Fatalf("test command %q", test)
					}
					sh := func(cmd string) (string, error) {
						c := exec.Command("sh", "-c", cmd)
						c.Dir = root
						c.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
						b, err := c.CombinedOutput()
						return string(b), err
					}
					if out, err := sh(build); err != nil {
						t.Fatalf("%s: %v\n%s", build, err, out)
					}
					dir := filepath.Join(root, name)
					// The test command runs where the build command left the shell.
					out, err := sh("cd " + dir + " && " + test + " --cache ''")
					if err != nil || !strings.HasPrefix(out, "ok plugin.wasm: ") {
						t.Fatalf("%s: %v\n%s", test, err, out)
					}
					// An expected output that is wrong fails.
					exp := filepath.Join(dir, "testdata", "out.jsonl")
					want, _ := os.ReadFile(exp)
					bad := bytes.Replace(want, []byte(`"input_offset":1}`), []byte(`"input_offset":1,"kind":"trap"}`), 1)
					if kind == "codec" {
						bad = bytes.Replace(want, []byte("olleh"), []byte("hello"), 1)
					}
					if bytes.Equal(bad, want) {
						t.Fatal("could not break the expected output")
					}
					if err := os.WriteFile(exp, bad, 0o644); err != nil {
						t.Fatal(err)
					}
					if out, err := sh("cd " + dir + " && " + test + " --cache ''"); err == nil || !strings.HasPrefix(out, "FAIL plugin.wasm") {
						t.Fatalf("with a wrong expected output: %v\n%s", err, out)
					}
				})
			}
		})
	}
}

// TestNewRefuses: bad names, languages, kinds, a directory in use and an
// --sdk that is not one are refused, naming what is wrong, and write nothing.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	used := filepath.Join(dir, "used")
	if err := os.MkdirAll(used, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(used, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sdk, _ := filepath.Abs("../../../sdk")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--lang", "go", "--kind", "transform"}, "missing NAME"},
		{[]string{"--lang", "go", "--kind", "transform", "Upper"}, `NAME "Upper": want a lower-case letter`},
		{[]string{"--lang", "go", "--kind", "transform", "1x"}, `NAME "1x"`},
		{[]string{"--lang", "cobol", "--kind", "transform", "x"}, `--lang "cobol": want one of go, rust, c, assemblyscript, wat`},
		{[]string{"--lang", "go", "--kind", "source", "x"}, `--kind "source": want one of transform, codec, sink`},
		{[]string{"--lang", "go", "--kind", "sink", "--sdk", sdk, "--dir", used, "x"}, used + " exists and is not empty"},
		{[]string{"--lang", "go", "--kind", "sink", "--sdk", dir, "--dir", filepath.Join(dir, "n"), "x"}, "not a streamd sdk/ folder"},
	} {
		var o, e bytes.Buffer
		code := plugincli.Main(context.Background(), append([]string{"new"}, tt.args...), &o, &e, plugincli.OpenDefault)
		if code != 2 || !strings.Contains(e.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tt.args, code, e.String(), tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "n")); err == nil {
		t.Error("a refused plugin new wrote its directory")
	}
}
