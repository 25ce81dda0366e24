package plugincli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
)

var watBuilds sync.Map // name -> path

// watPlugin builds examples/wasm/wat/NAME.wat once per test binary.
func watPlugin(t *testing.T, name string) string {
	t.Helper()
	if p, ok := watBuilds.Load(name); ok {
		return p.(string)
	}
	out := filepath.Join(tmpRoot, name+".wasm")
	testenv.Wat2Wasm(t, "../../../examples/wasm/wat/"+name+".wat", out)
	watBuilds.Store(name, out)
	return out
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestErrorKinds: `plugin test` compares an error by
// its kind, so a plugin that traps or hangs no longer passes a test that
// expects it to reject a record; an expected error line needs neither
// input_offset nor kind (then: rejected); --messages compares the text too.
func TestErrorKinds(t *testing.T) {
	poison := watPlugin(t, "poison")
	misbehave := watPlugin(t, "misbehave")
	dir := t.TempDir()
	in := writeFile(t, dir, "in.jsonl", `{"value":"ok-1","offset":1}
{"value":"poison","offset":2}
{"value":"reject","offset":3}
`)
	one := writeFile(t, dir, "one.jsonl", `{"value":"a","offset":7}`+"\n")
	tests := []struct {
		name   string
		plugin string
		input  string
		expect string
		flags  []string
		code   int
		out    string
	}{
		{"trap expected as a rejection", poison, in, `{"value":"ok-1","partition":0,"offset":1}
{"error":"boom","input_offset":2}
{"error":"rejected by poison.wat","input_offset":3}
`, nil, 1, "line 2 differs: error of kind trap, want rejected"},
		{"trap expected as a trap", poison, in, `{"value":"ok-1","partition":0,"offset":1}
{"error":"","kind":"trap","input_offset":2}
{"error":"rejected by poison.wat","input_offset":3}
`, nil, 0, "ok "},
		{"no input_offset, no kind", poison, in, `{"value":"ok-1","partition":0,"offset":1}
{"kind":"trap"}
{"error":"rejected by poison.wat"}
`, nil, 0, "ok "},
		{"wrong kind name", poison, in, `{"error":"x","kind":"crash"}`, nil, 2, ""},
		{"hang expected as a rejection", misbehave, one, `{"error":"x","input_offset":7}`, []string{"--config", `{"mode":"loop"}`, "--timeout", "100ms"}, 1,
			"line 1 differs: error of kind timeout, want rejected"},
		{"hang expected as a timeout", misbehave, one, `{"kind":"timeout"}`, []string{"--config", `{"mode":"loop"}`, "--timeout", "100ms"}, 0, "ok "},
		{"memory", misbehave, one, `{"kind":"memory"}`, []string{"--config", `{"mode":"huge grow"}`}, 0, "ok "},
		{"messages: part of it", poison, in, `{"value":"ok-1","partition":0,"offset":1}
{"error":"unreachable","kind":"trap"}
{"error":"rejected by"}
`, []string{"--messages"}, 0, "ok "},
		{"messages: another", poison, in, `{"value":"ok-1","partition":0,"offset":1}
{"error":"unreachable","kind":"trap"}
{"error":"missing order_id"}
`, []string{"--messages"}, 1, "line 3 differs: the message does not contain the expected one"},
		{"messages: not compared without the flag", poison, in, `{"value":"ok-1","partition":0,"offset":1}
{"error":"unreachable","kind":"trap"}
{"error":"missing order_id"}
`, nil, 0, "ok "},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect := writeFile(t, dir, "expect"+string(rune('a'+i))+".jsonl", tt.expect)
			args := append([]string{"test", tt.plugin, "--input", tt.input, "--expect", expect}, tt.flags...)
			code, out, errOut := run(t, args...)
			if code != tt.code || !strings.Contains(out, tt.out) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tt.code, tt.out, out, errOut)
			}
		})
	}
}

// TestLimitsAreThePipelines: run and test use a
// pipeline's limits unless told otherwise, say which in their summary
// line, and take flags to change them.
func TestLimitsAreThePipelines(t *testing.T) {
	misbehave := watPlugin(t, "misbehave")
	dir := t.TempDir()
	in := writeFile(t, dir, "in.jsonl", "{\"value\":\"a\",\"offset\":1}\n{\"value\":\"b\",\"offset\":2}\n{\"value\":\"c\",\"offset\":3}\n")

	// 62.5 MiB is over the pipeline default of 16 MiB...
	code, out, errOut := run(t, "run", misbehave, "--input", in, "--config", `{"mode":"huge grow"}`)
	if code != 0 || strings.Count(out, `"kind":"memory"`) != 3 {
		t.Fatalf("default memory: exit %d\n%s%s", code, out, errOut)
	}
	summary := "3 records in 1 batch, 0 out, 3 errors (3 memory), 1 failed batch run record by record"
	limits := "--timeout 5s --max-memory-pages 256 (16 MiB) --batch 1024 --batch-bytes 1048576 --max-record-bytes 1048588 --pool 2"
	if !strings.Contains(errOut, summary) || !strings.Contains(errOut, limits) {
		t.Fatalf("summary line: %q, want %q and %q", errOut, summary, limits)
	}
	// ...and fits in 2048 pages (128 MiB).
	code, out, errOut = run(t, "run", misbehave, "--input", in, "--config", `{"mode":"huge grow"}`, "--max-memory-pages", "2048")
	if code != 0 || strings.Count(out, `"offset":`) != 3 || strings.Contains(out, "error") ||
		!strings.Contains(errOut, "3 records in 1 batch, 3 out, 0 errors, ") || !strings.Contains(errOut, "--max-memory-pages 2048 (128 MiB)") {
		t.Fatalf("--max-memory-pages 2048: exit %d\n%s%s", code, out, errOut)
	}
	// --batch and --pool are passed on; --timeout bounds a call.
	code, out, errOut = run(t, "test", misbehave, "--input", in, "--expect", in, "--batch", "2", "--pool", "1",
		"--timeout", "150ms", "--clock", "--random=false")
	want := "ok " + misbehave + ": 3 lines match " + in + "\n  3 records in 2 batches, 3 out, 0 errors, "
	if code != 0 || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, "--timeout 150ms --max-memory-pages 256 (16 MiB) --batch 2 --batch-bytes 1048576 --max-record-bytes 1048588 --pool 1 --clock --random=false\n") {
		t.Fatalf("test: exit %d\n%s%s", code, out, errOut)
	}
	for _, bad := range [][]string{
		{"--max-memory-pages", "0"}, {"--max-memory-pages", "65537"}, {"--pool", "0"}, {"--timeout", "0s"}, {"--batch-bytes", "0"},
		{"--max-record-bytes", "0"}, {"--max-record-bytes", "100"},
	} {
		args := append([]string{"run", misbehave, "--input", in}, bad...)
		if code, _, errOut := run(t, args...); code != 2 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: exit %d, %s", bad, code, errOut)
		}
	}
}

// TestHangingGuestIsolationBounded: a guest that hangs on every record
// costs the batch's call and MaxIsolationTimeouts calls with one record,
// not one per record; the rest are error lines saying why.
func TestHangingGuestIsolationBounded(t *testing.T) {
	misbehave := watPlugin(t, "misbehave")
	var b strings.Builder
	for i := range 50 {
		b.WriteString(`{"value":"x","offset":` + strconv.Itoa(i) + "}\n")
	}
	in := writeFile(t, t.TempDir(), "in.jsonl", b.String())
	code, out, errOut := run(t, "run", misbehave, "--input", in, "--config", `{"mode":"loop"}`, "--timeout", "100ms")
	if code != 0 || strings.Count(out, `"kind":"timeout"`) != 50 || strings.Count(out, "timed out after 100ms") != 2 ||
		strings.Count(out, "not run alone: 2 records of this batch timed out alone") != 48 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestRunOutputIsInput: what `plugin run` prints can
// be fed to `plugin run --input` (its error lines are skipped).
func TestRunOutputIsInput(t *testing.T) {
	poison := watPlugin(t, "poison")
	dir := t.TempDir()
	in := writeFile(t, dir, "in.jsonl", "{\"value\":\"ok-1\",\"offset\":1}\n{\"value\":\"reject\",\"offset\":3}\n{\"value\":\"ok-4\",\"offset\":4}\n")
	code, out, errOut := run(t, "run", poison, "--input", in)
	if code != 0 || !strings.Contains(out, `"error"`) {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	again := writeFile(t, dir, "again.jsonl", out)
	code, out2, errOut := run(t, "run", poison, "--input", again)
	if code != 0 || out2 != "{\"value\":\"ok-1\",\"partition\":0,\"offset\":1}\n{\"value\":\"ok-4\",\"partition\":0,\"offset\":4}\n" {
		t.Fatalf("second run: exit %d\n%s%s", code, out2, errOut)
	}
}

// TestGrantFlags: --clock gives the guest the real clock (without it, the
// fake one of 2022), --random=false the fixed sequence, --config @FILE a
// config from a file.
func TestGrantFlags(t *testing.T) {
	testenv.Tool(t, "clang")
	probe := filepath.Join(tmpRoot, "wasiprobe.wasm")
	if b, err := exec.Command("sh", "../../../examples/wasm/c/build-plugin.sh", probe, "../../../runtime/testdata/wasiprobe.c").CombinedOutput(); err != nil {
		if strings.Contains(string(b), "sysroot is missing") {
			testenv.Missing(t, "wasi-libc (run scripts/install-tools)")
		}
		t.Fatalf("build wasiprobe: %v\n%s", err, b)
	}
	dir := t.TempDir()
	in := writeFile(t, dir, "in.jsonl", "{\"value\":\"time\"}\n{\"value\":\"rand 8\"}\n")
	value := func(args ...string) []string {
		t.Helper()
		code, out, errOut := run(t, append([]string{"run", probe, "--input", in}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		var vals []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			v := l[strings.Index(l, `"value":"`)+9:]
			vals = append(vals, v[:strings.IndexByte(v, '"')])
		}
		return vals
	}
	year := func(v string) int {
		t.Helper()
		ns, err := strconv.ParseInt(strings.Fields(strings.TrimPrefix(v, "ok:"))[0], 10, 64)
		if err != nil {
			t.Fatalf("time: %s", v)
		}
		return time.Unix(0, ns).UTC().Year()
	}
	fake, real := value(), value("--clock")
	if year(fake[0]) != 2022 || year(real[0]) != time.Now().UTC().Year() {
		t.Errorf("clock: without --clock %s, with %s", fake[0], real[0])
	}
	fixed1, fixed2 := value("--random=false"), value("--random=false")
	if fixed1[1] != fixed2[1] || real[1] == fake[1] {
		t.Errorf("random: fixed %s and %s, crypto %s and %s", fixed1[1], fixed2[1], real[1], fake[1])
	}
	cfg := writeFile(t, dir, "config.json", `{"mode":"trap"}`)
	misbehave := watPlugin(t, "misbehave")
	if code, out, _ := run(t, "run", misbehave, "--input", in, "--config", "@"+cfg); code != 0 || strings.Count(out, `"kind":"trap"`) != 2 {
		t.Errorf("--config @file: exit %d\n%s", code, out)
	}
	if code, _, errOut := run(t, "run", misbehave, "--input", in, "--config", "@"+filepath.Join(dir, "nope.json")); code != 2 || !strings.Contains(errOut, "nope.json") {
		t.Errorf("--config @missing: exit %d %s", code, errOut)
	}
}
