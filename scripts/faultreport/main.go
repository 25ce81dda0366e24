// Command faultreport renders the fault suite's results (internal/tests/faults
// writes them to bin/faults-kafka.json and bin/faults-kfake.json) as
// Markdown tables, one per broker: per fault and error policy, the records
// in and out, missing, duplicates, dead-lettered, the time to recover,
// what /readyz said, SIGTERM during the fault, and the verdict.
//
// With -doc it replaces the text between the lines
//
//	<!-- fault-table:begin -->
//	<!-- fault-table:end -->
//
// of that file (docs/reliability.md) instead of printing, so that the
// document's figures come from a run and are never typed in; -marker
// names another pair of lines (<!-- NAME:begin --> ... <!-- NAME:end -->).
//
// Usage:
//
//	go run ./scripts/faultreport [-doc docs/reliability.md [-marker NAME]] [-note TEXT] bin/faults-kafka.json bin/faults-kfake.json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
)

// result is internal/tests/faults' result (its JSON).
type result struct {
	Backend        string   `json:"backend"`
	Case           string   `json:"case"`
	Fault          string   `json:"fault"`
	Policy         string   `json:"policy"`
	Role           string   `json:"role"`
	In             int      `json:"in"`
	Out            int      `json:"out"`
	DLQ            int      `json:"dlq"`
	Missing        int      `json:"missing"`
	Duplicates     int      `json:"duplicates"`
	DupBound       int      `json:"duplicate_bound"`
	Held           int      `json:"held"`
	RecoverSeconds float64  `json:"recover_seconds"`
	Readyz         string   `json:"readyz"`
	SigtermSeconds float64  `json:"sigterm_seconds"`
	ExitCode       *int     `json:"exit_code"`
	Failures       []string `json:"failures"`
}

func main() {
	doc := flag.String("doc", "", "replace the fault table in this Markdown file")
	note := flag.String("note", "", "a line to print above the tables (when and how they were measured)")
	marker := flag.String("marker", "fault-table", "with -doc: replace between <!-- MARKER:begin --> and <!-- MARKER:end -->")
	flag.Parse()
	begin, end := "<!-- "+*marker+":begin -->", "<!-- "+*marker+":end -->"
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: faultreport [-doc FILE] [-note TEXT] RESULTS.json...")
		os.Exit(2)
	}
	var b bytes.Buffer
	if *note != "" {
		fmt.Fprintf(&b, "%s\n\n", *note)
	}
	for _, path := range flag.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			fatal(err)
		}
		var rs []result
		if err := json.Unmarshal(data, &rs); err != nil {
			fatal(fmt.Errorf("%s: %w", path, err))
		}
		render(&b, rs)
	}
	if *doc == "" {
		_, _ = os.Stdout.Write(b.Bytes())
		return
	}
	old, err := os.ReadFile(*doc)
	if err != nil {
		fatal(err)
	}
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		fatal(fmt.Errorf("%s has no %s ... %s lines", *doc, begin, end))
	}
	out := append([]byte{}, old[:i+len(begin)]...)
	out = append(out, '\n')
	out = append(out, b.Bytes()...)
	out = append(out, old[j:]...)
	if err := os.WriteFile(*doc, out, 0o644); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "faultreport:", err)
	os.Exit(1)
}

var backends = map[string]string{"kafka": "Apache Kafka 4.1 (scripts/kafka)", "kfake": "kfake (in-process, or `streamd broker` where the broker process is stopped or frozen)"}

var roles = map[string]string{
	"ride":    "rides it out",
	"sigterm": "SIGTERM during it, restarted after",
	"kill":    "SIGKILLed, restarted",
	"file":    "runs to the end",
	"stop":    "rides it out",
	"late":    "started during it",
}

func render(b *bytes.Buffer, rs []result) {
	if len(rs) == 0 {
		return
	}
	name := backends[rs[0].Backend]
	if name == "" {
		name = rs[0].Backend
	}
	pass, fail := 0, 0
	for _, r := range rs {
		if len(r.Failures) == 0 {
			pass++
		} else {
			fail++
		}
	}
	fmt.Fprintf(b, "#### %s: %d rows, %d pass, %d fail\n\n", name, len(rs), pass, fail)
	fmt.Fprintln(b, "| fault | policy | daemon | in | out | missing | duplicates (bound) | DLQ | recovered after | /readyz said | SIGTERM during the fault | verdict |")
	fmt.Fprintln(b, "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---|")
	prev := ""
	for _, r := range rs {
		var fault string
		if r.Case == prev {
			fault = "〃"
		} else {
			fault = fmt.Sprintf("**%s**: %s", r.Case, r.Fault)
		}
		prev = r.Case
		role := roles[r.Role]
		if role == "" {
			role = r.Role
		}
		rec := "never"
		if r.RecoverSeconds >= 0 {
			rec = fmt.Sprintf("%.1f s", r.RecoverSeconds)
		}
		missing := fmt.Sprint(r.Missing)
		if r.Held > 0 {
			missing += fmt.Sprintf(" (%d held uncommitted)", r.Held)
		}
		term := "—"
		if r.Role == "sigterm" {
			code := "?"
			if r.ExitCode != nil {
				code = fmt.Sprint(*r.ExitCode)
			}
			term = fmt.Sprintf("exit %s after %.1f s", code, r.SigtermSeconds)
		}
		verdict := "pass"
		if len(r.Failures) > 0 {
			verdict = "**FAIL**: " + strings.Join(r.Failures, "; ")
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %s | %d (%d) | %d | %s | %s | %s | %s |\n",
			cell(fault), r.Policy, role, r.In, r.Out, missing, r.Duplicates, r.DupBound, r.DLQ, rec, cell(r.Readyz), term, cell(verdict))
	}
	fmt.Fprintln(b)
}

// cell escapes a table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
