// Command secretscan searches logs for secrets: every line of the
// -secrets files (and every *.password file in the -dir directories) is a
// secret, and every file under the paths given is searched for each one,
// as written and base64-encoded (at each of the three alignments, std and
// URL alphabets: how a SASL PLAIN message or a basic-auth header would
// carry it). It prints each hit as FILE:LINE and the secret's first four
// characters only, and exits 1 if there is any; 2 on a usage error.
//
// scripts/test runs it over the whole suite's logs:
//
//	go run ./scripts/secretscan -secrets bin/secrets.txt -dir "$STREAMD_TEST_KAFKA_SECURE" bin/test-*.log bin/logs
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// minLen is the shortest secret searched for: shorter lines of a
// secrets file (a stray "x") would match everywhere.
const minLen = 8

func main() {
	var secretFiles, dirs multi
	flag.Var(&secretFiles, "secrets", "a file of secrets, one a line (repeatable; a missing file is no secret)")
	flag.Var(&dirs, "dir", "a directory whose *.password files are secrets (repeatable)")
	flag.Parse()
	secrets, err := load(secretFiles, dirs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "secretscan:", err)
		os.Exit(2)
	}
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: secretscan -secrets FILE [-dir DIR] PATH...")
		os.Exit(2)
	}
	hits, files, err := scan(secrets, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "secretscan:", err)
		os.Exit(2)
	}
	for _, h := range hits {
		fmt.Println(h)
	}
	if len(hits) > 0 {
		fmt.Printf("secretscan: %d secrets found in the logs (%d secrets searched in %d files)\n", len(hits), len(secrets), files)
		os.Exit(1)
	}
	fmt.Printf("secretscan: no secret in %d files (%d secrets searched, each raw and base64-encoded)\n", files, len(secrets))
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// load reads the secrets.
func load(files, dirs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) >= minLen && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			add(l)
		}
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		ms, _ := filepath.Glob(filepath.Join(d, "*.password"))
		for _, m := range ms {
			b, err := os.ReadFile(m)
			if err != nil {
				return nil, err
			}
			add(string(b))
		}
	}
	sort.Strings(out)
	return out, nil
}

// forms returns what to look for: s, and s base64-encoded at each of the
// three alignments in both alphabets (the encoding of s inside a longer
// message: the part that depends on s alone).
func forms(s string) []string {
	f := []string{s}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pad := 0; pad < 3; pad++ {
			e := enc.EncodeToString(append(make([]byte, pad), s...))
			// Drop the characters touched by the padding bytes and by the
			// unknown bytes after s.
			start := (pad*8 + 5) / 6
			end := len(e) - 4
			if end-start >= minLen {
				f = append(f, e[start:end])
			}
		}
	}
	return f
}

// scan searches the files under paths; it returns the hits and how many
// files it read.
func scan(secrets []string, paths []string) ([]string, int, error) {
	type needle struct{ form, label string }
	var needles []needle
	for _, s := range secrets {
		for _, f := range forms(s) {
			needles = append(needles, needle{f, s[:4] + "…"})
		}
	}
	var hits []string
	files := 0
	check := func(path string) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		files++
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for ln := 1; sc.Scan(); ln++ {
			line := sc.Bytes()
			for _, n := range needles {
				if bytes.Contains(line, []byte(n.form)) {
					hits = append(hits, fmt.Sprintf("%s:%d: secret %s", path, ln, n.label))
				}
			}
		}
		return sc.Err()
	}
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			return check(path)
		})
		if err != nil {
			return hits, files, err
		}
	}
	return hits, files, nil
}
