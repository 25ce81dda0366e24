package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	const stream = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"secret-of-passing-test\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: boom\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:12: daemon log:\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"        time=2026-12-01T18:22:22.349Z level=INFO msg=\"a daemon's log line\"\n"}
{"Action":"fail","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: SKIP (not available here): kcat\n"}
{"Action":"output","Package":"p","Test":"TestC","Output":"--- SKIP: TestC (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}
{"Action":"fail","Package":"p"}
`
	tests := []struct {
		name     string
		in       string
		rc       int
		want     []string
		dontWant []string
	}{
		{"mixed", stream, 1,
			[]string{"b_test.go:9: boom", "failed tests, each with its last file:line lines (the whole output is above):\n  FAIL p TestB\n    b_test.go:9: boom\n\nx: 1 packages FAILED", "SKIP p TestC: c_test.go:3: SKIP (not available here): kcat", "1 packages FAILED: p", "x: 1 passed, 1 failed, 1 skipped\n"},
			[]string{"secret-of-passing-test", "PASS\n"}},
		{"all pass", `{"Action":"pass","Package":"q","Test":"TestA"}` + "\n" + `{"Action":"output","Package":"q","Output":"ok  \tq\t0.1s\n"}` + "\n", 0,
			[]string{"ok  \tq", "x: 1 passed, 0 failed, 0 skipped\n"}, nil},
		{"build failure", `{"ImportPath":"r","Action":"build-output","Output":"r/a.go:1: syntax error\n"}` + "\n" + `{"Action":"fail","Package":"r"}` + "\n", 1,
			[]string{"syntax error", "FAILED: r", "x: 0 passed, 0 failed, 0 skipped"}, nil},
		{"not json", "go: cannot find main module\n", 1, []string{"cannot find main module"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			rc := run(strings.NewReader(tt.in), &out, "x", "")
			if rc != tt.rc {
				t.Errorf("rc = %d, want %d", rc, tt.rc)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}
}
