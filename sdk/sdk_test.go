package sdk

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write go.txtar from sdk/go/streamd")

const txtarHeader = `The Go guest SDK (sdk/go/streamd, a module of its own) as streamd embeds
it for plugin new. Made by: go test ./sdk -run TestGoArchive -update
`

// goModule reads sdk/go/streamd as a project needs it: go.mod and the
// .go files that are not tests.
func goModule(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	root := filepath.Join("go", "streamd")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := filepath.Base(p)
		if name != "go.mod" && (!strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go")) {
			return nil
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoArchive: go.txtar is sdk/go/streamd as it is (-update writes it).
func TestGoArchive(t *testing.T) {
	want, err := formatTxtar(txtarHeader, goModule(t))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("go.txtar", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("go.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("sdk/go.txtar is not sdk/go/streamd: run go test ./sdk -run TestGoArchive -update")
	}
}

// TestFiles: each language's files are the SDK's own, byte for byte.
func TestFiles(t *testing.T) {
	for lang, dir := range Dirs {
		files, err := Files(lang)
		if err != nil {
			t.Fatal(err)
		}
		for _, must := range map[string]string{"go": "go/streamd/go.mod", "rust": "rust/Cargo.toml", "c": "c/streamd.h", "assemblyscript": "assemblyscript/package.json"} {
			if strings.HasPrefix(must, dir+"/") {
				if _, ok := files[must]; !ok {
					t.Errorf("%s: no %s in %v", lang, must, keys(files))
				}
			}
		}
		for name, body := range files {
			if !strings.HasPrefix(name, dir+"/") {
				t.Errorf("%s: %s is not under %s", lang, name, dir)
			}
			disk, err := os.ReadFile(filepath.FromSlash(name))
			if err != nil || !bytes.Equal(disk, body) {
				t.Errorf("%s: %s differs from sdk/%s (%v)", lang, name, name, err)
			}
		}
	}
	if _, err := Files("cobol"); err == nil {
		t.Error("Files(cobol): no error")
	}
}

func TestTxtarRoundTrip(t *testing.T) {
	in := map[string][]byte{"a.go": []byte("package a\n"), "d/b.go": []byte("x\n-- not a marker\n"), "empty": {}}
	b, err := formatTxtar("comment\n", in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := parseTxtar(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d files, want %d", len(out), len(in))
	}
	for k, v := range in {
		if !bytes.Equal(out[k], v) {
			t.Errorf("%s: %q, want %q", k, out[k], v)
		}
	}
	if _, err := formatTxtar("", map[string][]byte{"x": []byte("-- y --\n")}); err == nil {
		t.Error("a marker line inside a file: no error")
	}
	if _, err := formatTxtar("", map[string][]byte{"x": []byte("no newline")}); err == nil {
		t.Error("a file without a final newline: no error")
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
