package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScanFinds: a secret is found as written and base64-encoded inside a
// longer message (a SASL PLAIN "\x00user\x00password", a basic-auth
// header), at any alignment; a log without it passes; a hit never prints
// the secret.
func TestScanFinds(t *testing.T) {
	secret := "0123456789abcdef-s3cret"
	dir := t.TempDir()
	logs := map[string]string{
		"raw.log":    "level=INFO msg=x password=" + secret + "\n",
		"plain.log":  "sasl " + base64.StdEncoding.EncodeToString([]byte("\x00alice\x00"+secret)) + "\n",
		"basic.log":  "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+secret)) + "\n",
		"url.log":    "token=" + base64.URLEncoding.EncodeToString([]byte("ab"+secret+"z")) + "\n",
		"clean.log":  "level=INFO msg=\"nothing to see\" password=[redacted]\n",
		"sub/n.json": `{"Output":"` + secret + `"}` + "\n",
	}
	for name, c := range logs {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hits, files, err := scan([]string{secret}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if files != len(logs) {
		t.Errorf("%d files read, want %d", files, len(logs))
	}
	got := strings.Join(hits, "\n")
	for _, name := range []string{"raw.log", "plain.log", "basic.log", "url.log", filepath.Join("sub", "n.json")} {
		if !strings.Contains(got, name+":1:") {
			t.Errorf("no hit in %s:\n%s", name, got)
		}
	}
	if strings.Contains(got, "clean.log") || strings.Contains(got, secret) {
		t.Errorf("hits:\n%s", got)
	}
	if h, _, _ := scan([]string{secret}, []string{filepath.Join(dir, "clean.log")}); len(h) != 0 {
		t.Errorf("a clean log: %v", h)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.txt"), []byte("long-enough-secret\nx\n\nlong-enough-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alice.password"), []byte("alice-password-1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := load([]string{filepath.Join(dir, "s.txt"), filepath.Join(dir, "missing.txt")}, []string{dir})
	if err != nil || len(s) != 2 || s[0] != "alice-password-1234" || s[1] != "long-enough-secret" {
		t.Fatalf("%q %v", s, err)
	}
}
