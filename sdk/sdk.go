// Package sdk holds the guest SDKs that streamd ships in its binary, so
// that `streamd plugin new` run from an installed streamd, outside any
// checkout, writes the SDK a new plugin project builds with into the
// project: the files a project needs of sdk/c, sdk/rust, sdk/assemblyscript
// and sdk/go/streamd.
//
// sdk/go/streamd is a Go module of its own, and go:embed cannot reach into
// another module, so its files are kept in go.txtar beside this file, made
// from sdk/go/streamd by `go test ./sdk -run TestGoArchive -update`;
// TestGoArchive fails when go.txtar differs from sdk/go/streamd.
package sdk

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// files are the SDKs' files, at their paths under sdk/.
//
//go:embed c/streamd.h c/streamd.c c/README.md
//go:embed rust/Cargo.toml rust/README.md rust/src/*.rs
//go:embed assemblyscript/package.json assemblyscript/README.md assemblyscript/index.ts
//go:embed assemblyscript/assembly/*.ts assemblyscript/harness/*.mjs assemblyscript/bin/*.mjs
//go:embed go.txtar
var files embed.FS

// Dirs are the folders under sdk/ each language's SDK is in.
var Dirs = map[string]string{
	"go":             "go/streamd",
	"rust":           "rust",
	"c":              "c",
	"assemblyscript": "assemblyscript",
}

// Files returns the files of lang's SDK (go, rust, c or assemblyscript),
// by their paths under sdk/ (such as rust/src/lib.rs).
func Files(lang string) (map[string][]byte, error) {
	dir, ok := Dirs[lang]
	if !ok {
		return nil, fmt.Errorf("no %s SDK", lang)
	}
	out := map[string][]byte{}
	if lang == "go" {
		b, err := files.ReadFile("go.txtar")
		if err != nil {
			return nil, err
		}
		archive, err := parseTxtar(b)
		if err != nil {
			return nil, fmt.Errorf("sdk/go.txtar: %w", err)
		}
		for name, body := range archive {
			out[path.Join(dir, name)] = body
		}
		return out, nil
	}
	err := fs.WalkDir(files, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		out[p] = b
		return err
	})
	return out, err
}

// txtar: "-- NAME --" lines, each followed by that file's content (as in
// golang.org/x/tools/txtar).

func parseTxtar(b []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	var name string
	var body []byte
	flush := func() {
		if name != "" {
			out[name] = body
		}
	}
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		if n, ok := marker(string(line)); ok {
			flush()
			name, body = n, []byte{}
		} else if name != "" {
			body = append(body, line...)
			body = append(body, '\n')
		}
		b = rest
	}
	flush()
	if len(out) == 0 {
		return nil, fmt.Errorf("no files")
	}
	return out, nil
}

func marker(line string) (string, bool) {
	if !strings.HasPrefix(line, "-- ") || !strings.HasSuffix(line, " --") || len(line) < 7 {
		return "", false
	}
	return strings.TrimSpace(line[3 : len(line)-3]), true
}

// formatTxtar writes files (each ending in a newline, none with a marker
// line) as a txtar archive, sorted by name.
func formatTxtar(header string, files map[string][]byte) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(header)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		body := files[n]
		if len(body) > 0 && body[len(body)-1] != '\n' {
			return nil, fmt.Errorf("%s does not end in a newline", n)
		}
		for _, l := range strings.Split(string(body), "\n") {
			if _, ok := marker(l); ok {
				return nil, fmt.Errorf("%s has a line %q that reads as a file marker", n, l)
			}
		}
		fmt.Fprintf(&out, "-- %s --\n", n)
		out.Write(body)
	}
	return out.Bytes(), nil
}
