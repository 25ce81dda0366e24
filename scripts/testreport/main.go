// Command testreport reads `go test -json` on stdin and prints what plain
// `go test` prints (package results, and the output of failed tests only),
// then the skipped tests with their reasons, and a closing line:
//
//	LABEL: N passed, N failed, N skipped
//
// It exits 1 if any test or package failed (including build failures), and
// also writes the full stream, as text, to -log when given.
//
// Usage:
//
//	go test -json ./... | go run ./scripts/testreport -label kfake -log pass1.log
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

type key struct{ pkg, test string }

func main() {
	label := flag.String("label", "tests", "one word naming this run in the closing line")
	logPath := flag.String("log", "", "also write every output line to this file")
	flag.Parse()
	os.Exit(run(os.Stdin, os.Stdout, *label, *logPath))
}

func run(in io.Reader, out io.Writer, label, logPath string) (rc int) {
	logw := io.Discard
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			fmt.Fprintln(out, "testreport:", err)
			return 1
		}
		bw := bufio.NewWriter(f)
		defer func() {
			// A log that could not be written fails the pass: CI reads it.
			if err := errors.Join(bw.Flush(), f.Close()); err != nil {
				fmt.Fprintln(out, "testreport:", err)
				rc = 1
			}
		}()
		logw = bw
	}
	var (
		buffered                = map[key][]string{} // output of running tests
		skips                   []string
		passed, failed, skipped int
		pkgFailed               []string
		badLines                int
		why                     []string // per failed test: its name and last file:line lines
	)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not JSON: go vet or build noise; pass it through.
			fmt.Fprintf(out, "%s\n", line)
			fmt.Fprintf(logw, "%s\n", line)
			badLines++
			continue
		}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
			fmt.Fprint(logw, e.Output)
			continue
		case "output":
			fmt.Fprint(logw, e.Output)
			if e.Test == "" {
				if e.Output != "PASS\n" { // plain go test does not print it
					fmt.Fprint(out, e.Output) // ok/FAIL lines, panics, package output
				}
			} else {
				k := key{e.Package, e.Test}
				buffered[k] = append(buffered[k], e.Output)
			}
			continue
		}
		if e.Test == "" {
			if e.Action == "fail" {
				pkgFailed = append(pkgFailed, e.Package)
				// Tests still running when the package failed (a
				// timeout or a panic): show what they printed.
				for k, lines := range buffered {
					if k.pkg == e.Package {
						fmt.Fprint(out, strings.Join(lines, ""))
						delete(buffered, k)
					}
				}
			}
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "pass":
			passed++
			delete(buffered, k)
		case "fail":
			failed++
			fmt.Fprint(out, strings.Join(buffered[k], ""))
			why = append(why, failWhy(k, buffered[k])...)
			delete(buffered, k)
		case "skip":
			skipped++
			skips = append(skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, skipReason(buffered[k])))
			delete(buffered, k)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testreport: reading input:", err)
		return 1
	}
	if len(skips) > 0 {
		sort.Strings(skips)
		fmt.Fprintf(out, "\n%s: %d skipped tests:\n", label, len(skips))
		for _, s := range skips {
			fmt.Fprintln(out, "  SKIP", s)
		}
	}
	if len(why) > 0 {
		// Repeated at the end, where a reader of only the last lines of a
		// long log (CI's excerpt) finds them: a failed test's own output
		// may be followed by hundreds of lines of its daemon's log.
		fmt.Fprintf(out, "\n%s: failed tests, each with its last file:line lines (the whole output is above):\n", label)
		for _, w := range why {
			fmt.Fprintln(out, w)
		}
	}
	if len(pkgFailed) > 0 {
		sort.Strings(pkgFailed)
		fmt.Fprintf(out, "\n%s: %d packages FAILED: %s\n", label, len(pkgFailed), strings.Join(pkgFailed, " "))
	}
	fmt.Fprintf(out, "%s: %d passed, %d failed, %d skipped\n", label, passed, failed, skipped)
	if failed > 0 || len(pkgFailed) > 0 || (passed == 0 && badLines > 0) {
		return 1
	}
	return 0
}

// whyLines is how many of a failed test's last file:line lines failWhy
// keeps, and whyWidth how much of each.
const (
	whyLines = 6
	whyWidth = 400
)

// failWhy returns the failed test k's name and the last whyLines lines of
// its output that name a source line (t.Fatal, t.Error and t.Log write
// "    file.go:NN: ...") and do not end in ":", each cut to whyWidth.
func failWhy(k key, lines []string) []string {
	var at []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		// A line that ends in ":" introduces what follows it (a log
		// tail), which is not a reason.
		if i := strings.Index(t, ".go:"); i > 0 && !strings.Contains(t[:i], " ") && strings.Contains(t[i:], ": ") && !strings.HasSuffix(t, ":") {
			if len(t) > whyWidth {
				t = t[:whyWidth] + "..."
			}
			at = append(at, "    "+t)
		}
	}
	if len(at) > whyLines {
		at = at[len(at)-whyLines:]
	}
	return append([]string{"  FAIL " + k.pkg + " " + k.test}, at...)
}

// skipReason picks the message a skipped test printed with t.Skip.
func skipReason(lines []string) string {
	var msgs []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		msgs = append(msgs, t)
	}
	if len(msgs) == 0 {
		return "(no reason given)"
	}
	r := strings.Join(msgs, " | ")
	if len(r) > 300 {
		r = r[:300] + "..."
	}
	return r
}
