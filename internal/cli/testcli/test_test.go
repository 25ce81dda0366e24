package testcli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// pipelineTestConfig has one pipeline per error policy over the poison.wat
// transform (a trap on "poison", a rejection on "reject") and one whose
// guest writes a Rust-style panic to stderr and traps (misbehave.wat).
const pipelineTestConfig = `[kafka]
brokers = ["127.0.0.1:1"]

[[pipeline]]
name = "dlq"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
name = "poison"
path = "poison.wasm"
[pipeline.sink]
type = "kafka"
topic = "out"
[pipeline.errors]
policy = "dlq"
dlq_topic = "dead"
[[pipeline.test]]
name = "isolates"
input = "in.jsonl"
output = "out.jsonl"
dlq = "dlq.jsonl"

[[pipeline]]
name = "stop"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
name = "poison"
path = "poison.wasm"
[pipeline.sink]
type = "kafka"
topic = "out"
[[pipeline.test]]
input = "in.jsonl"
output = "stop-out.jsonl"
error = "record /0@2 rejected by poison: plugin crashed: wasm error: unreachable"

[[pipeline]]
name = "panic"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
path = "misbehave.wasm"
config = { mode = "panic" }
[pipeline.sink]
type = "kafka"
topic = "out"
[pipeline.errors]
policy = "dlq"
dlq_topic = "dead"
[[pipeline.test]]
input = "one.jsonl"
dlq = "panic-dlq.jsonl"
`

// TestPipelineTests runs `streamd test` (pipeline tests) on
// pipelines whose stage traps, rejects and panics, under the dlq and stop
// policies: it passes with the right expectations, fails naming the
// difference with wrong ones, and --update writes what happened.
func TestPipelineTests(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"poison", "misbehave"} {
		testenv.Wat2Wasm(t, "../../../examples/wasm/wat/"+name+".wat", filepath.Join(dir, name+".wasm"))
	}
	files := map[string]string{
		"streamd.toml": pipelineTestConfig,
		"in.jsonl": `{"value":"ok-1","offset":1}
{"value":"poison","offset":2}
{"value":"reject","offset":3,"headers":{"h":"x"}}
{"value":"ok-4","offset":4}
`,
		"one.jsonl": `{"key":"k","value":"a","offset":9}` + "\n",
		// Hand-written: no partition or offset (not compared then), the
		// error header as part of the message.
		"out.jsonl": `{"value":"ok-1"}
{"value":"ok-4"}
`,
		"dlq.jsonl": `{"value":"poison","headers":{"streamd-error":"plugin crashed: wasm error: unreachable","streamd-stage":"poison","streamd-plugin":"poison","streamd-source-topic":"","streamd-source-partition":"0","streamd-source-offset":"2"}}
{"value":"reject","headers":{"h":"x","streamd-error":"rejected by poison.wat","streamd-stage":"poison","streamd-plugin":"poison","streamd-source-topic":"","streamd-source-partition":"0","streamd-source-offset":"3"}}
`,
		// Under stop, the records before the one that fails alone are
		// written before the pipeline stops (and again after a restart:
		// nothing is acked); those after it are not run.
		"stop-out.jsonl": `{"value":"ok-1"}
`,
		// The panic message is in the dead letter.
		"panic-dlq.jsonl": `{"key":"k","value":"a","headers":{"streamd-error":"plugin crashed: thread '<unnamed>' panicked at 'boom: no order_id', src/lib.rs:5:9: wasm error: unreachable","streamd-stage":"wasm-0","streamd-plugin":"misbehave","streamd-source-topic":"","streamd-source-partition":"0","streamd-source-offset":"9"}}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(dir, "streamd.toml")
	run := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := Main(context.Background(), args, &o, &e)
		return code, o.String(), e.String()
	}
	code, out, errOut := run(config)
	if code != 0 || strings.Count(out, "\nok ")+strings.Count(out[:3], "ok ") != 3 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "dlq/isolates: 4 records in, 2 out, 2 rejected (2 to the dead-letter queue, 0 dropped)") {
		t.Fatalf("summary:\n%s", out)
	}

	// Wrong expectations fail, saying where.
	for _, tt := range []struct{ file, old, new, want string }{
		{"out.jsonl", `{"value":"ok-4"}`, `{"value":"ok-5"}`, "output differs from out.jsonl\n  line 2 differs: value"},
		{"dlq.jsonl", `"streamd-error":"rejected by poison.wat"`, `"streamd-error":"rejected by something else"`, "dlq differs from dlq.jsonl\n  line 2 differs: header streamd-error"},
		{"dlq.jsonl", `"streamd-source-offset":"3"`, `"streamd-source-offset":"4"`, "line 2 differs: header streamd-source-offset"},
		{"streamd.toml", `error = "record /0@2 rejected by poison: plugin crashed`, `error = "record /0@3 rejected by poison: plugin crashed`, "the pipeline failed with"},
		{"panic-dlq.jsonl", `boom: no order_id`, `boom: no customer`, "dlq differs from panic-dlq.jsonl"},
	} {
		path := filepath.Join(dir, tt.file)
		orig, _ := os.ReadFile(path)
		if err := os.WriteFile(path, bytes.Replace(orig, []byte(tt.old), []byte(tt.new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := run(config)
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		if code != 1 || !strings.Contains(out, "FAIL ") || !strings.Contains(out, tt.want) {
			t.Errorf("%s with %s: exit %d, want 1 and %q\n%s%s", tt.file, tt.new, code, tt.want, out, errOut)
		}
	}

	// --update writes what happened; the test then passes as is.
	if err := os.WriteFile(filepath.Join(dir, "out.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("--update", "--pipeline", "dlq", config); code != 0 || !strings.HasPrefix(out, "updated ") {
		t.Fatalf("--update: exit %d\n%s%s", code, out, errOut)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if want := `{"value":"ok-1","partition":0,"offset":1}` + "\n" + `{"value":"ok-4","partition":0,"offset":4}` + "\n"; string(got) != want {
		t.Fatalf("--update wrote:\n%s\nwant:\n%s", got, want)
	}
	if code, out, errOut := run("--pipeline", "dlq", config); code != 0 {
		t.Fatalf("after --update: exit %d\n%s%s", code, out, errOut)
	}

	// Usage and config errors exit 2.
	for _, args := range [][]string{{}, {filepath.Join(dir, "nope.toml")}, {"--pipeline", "nosuch", config}} {
		if code, _, _ := run(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
