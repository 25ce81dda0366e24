package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	one := 1
	var b bytes.Buffer
	render(&b, []result{
		{Backend: "kafka", Case: "broker-stopped", Fault: "broker stopped (36 s)", Policy: "stop", Role: "ride", In: 10, Out: 10, DupBound: 5000, RecoverSeconds: 2.5, Readyz: "503 from +3.0s (\"sink | broker down\")"},
		{Backend: "kafka", Case: "broker-stopped", Fault: "broker stopped (36 s)", Policy: "drop", Role: "sigterm", In: 10, Out: 9, Missing: 1, RecoverSeconds: -1, SigtermSeconds: 11.4, ExitCode: &one, Failures: []string{"1 of 10 input records missing"}},
	})
	got := b.String()
	for _, want := range []string{
		"#### Apache Kafka 4.1 (scripts/kafka): 2 rows, 1 pass, 1 fail",
		"| **broker-stopped**: broker stopped (36 s) | stop | rides it out | 10 | 10 | 0 | 0 (5000) | 0 | 2.5 s | 503 from +3.0s (\"sink \\| broker down\") | — | pass |",
		"| 〃 | drop | SIGTERM during it, restarted after | 10 | 9 | 1 | 0 (0) | 0 | never |  | exit 1 after 11.4 s | **FAIL**: 1 of 10 input records missing |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks\n%s\ngot:\n%s", want, got)
		}
	}
}

// TestDoc: -doc replaces what is between the markers and keeps the rest.
func TestDoc(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "r.json")
	if err := os.WriteFile(res, []byte(`[{"backend":"kfake","case":"c","fault":"f","policy":"dlq","role":"ride","in":3,"out":3,"recover_seconds":0}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "doc.md")
	const begin, end = "<!-- fault-table:begin -->", "<!-- fault-table:end -->"
	if err := os.WriteFile(doc, []byte("# Title\n\n"+begin+"\nold table\n"+end+"\n\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "run", ".", "-doc", doc, "-note", "Measured now.", res).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, _ := os.ReadFile(doc)
	s := string(b)
	if strings.Contains(s, "old table") || !strings.HasPrefix(s, "# Title\n\n"+begin+"\nMeasured now.\n\n#### kfake") || !strings.HasSuffix(s, end+"\n\nafter\n") {
		t.Fatalf("doc:\n%s", s)
	}
}
