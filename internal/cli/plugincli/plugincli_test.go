package plugincli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/tests/testenv"
)

const (
	fixtureIn       = "../../../examples/wasm/testdata/orders-v2.jsonl"
	fixtureExpected = "../../../examples/wasm/testdata/orders-v1.expected.jsonl"
)

var buildDowngrade = sync.OnceValues(func() (string, error) {
	out := filepath.Join(tmpRoot, "orders-downgrade.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, ".")
	cmd.Dir = "../../../examples/wasm/go/orders-downgrade"
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return out, nil
})

// tmpRoot holds what the tests of this binary share: built plugins and a
// compilation cache.
var tmpRoot string

func TestMain(m *testing.M) {
	var err error
	if tmpRoot, err = os.MkdirTemp("", "streamd-plugincli-test-"); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(tmpRoot) // a temp dir; no test is left to fail
	os.Exit(code)
}

// cacheDir is a compilation cache shared by the tests of this binary.
func cacheDir(*testing.T) string { return filepath.Join(tmpRoot, "cache") }

func downgradePlugin(t *testing.T) string {
	t.Helper()
	p, err := buildDowngrade()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	args = append(args, "--cache", cacheDir(t))
	code = plugincli.Main(context.Background(), args, &o, &e, plugincli.OpenDefault)
	return code, o.String(), e.String()
}

// TestGoDowngradeConformance runs the Go orders-downgrade Wasm plugin over
// the conformance fixture with `streamd plugin test`.
func TestGoDowngradeConformance(t *testing.T) {
	wasm := downgradePlugin(t)
	for _, batch := range []string{"1", "5", "256"} {
		code, out, errOut := run(t, "test", "wasm:"+wasm, "--input", fixtureIn, "--expect", fixtureExpected, "--batch", batch)
		if code != 0 {
			t.Fatalf("batch %s: exit %d\n%s%s", batch, code, out, errOut)
		}
	}
	// run prints exactly the expected file.
	code, out, errOut := run(t, "run", wasm, "--input", fixtureIn)
	want, _ := os.ReadFile(fixtureExpected)
	if code != 0 || out != string(want) {
		t.Fatalf("run: exit %d, stderr %s\n%s", code, errOut, out)
	}
}

func TestTestReportsDifference(t *testing.T) {
	wasm := downgradePlugin(t)
	want, err := os.ReadFile(fixtureExpected)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(want), "\n")
	dir := t.TempDir()
	cases := map[string]string{
		// a changed amount in line 3
		"value": strings.Join(lines[:2], "") + strings.Replace(lines[2], `42`, `43`, 1) + strings.Join(lines[3:], ""),
		// an error line expected where a record comes out
		"error vs record": strings.Join(lines[:1], "") + `{"error":"x","input_offset":100}` + "\n" + strings.Join(lines[1:], ""),
		// error for another input
		"error offset": strings.Replace(string(want), `"input_offset":129}`, `"input_offset":128}`, 1),
		// a rejection expected as a crash
		"error kind": strings.Replace(string(want), `"kind":"rejected","input_offset":129}`, `"kind":"trap","input_offset":129}`, 1),
		"short":      strings.Join(lines[:10], ""),
	}
	for name, exp := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
			if err := os.WriteFile(path, []byte(exp), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, _ := run(t, "test", wasm, "--input", fixtureIn, "--expect", path)
			if code != 1 || !strings.Contains(out, "FAIL") || !strings.Contains(out, "line ") {
				t.Fatalf("exit %d, output:\n%s", code, out)
			}
		})
	}
	// Error messages are free text: a different message still matches.
	other := strings.Replace(string(want), `"error":"missing order_id"`, `"error":"order_id is required"`, 1)
	path := filepath.Join(dir, "messages.jsonl")
	if err := os.WriteFile(path, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, "test", wasm, "--input", fixtureIn, "--expect", path); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

func TestInspectAndUsage(t *testing.T) {
	wasm := downgradePlugin(t)
	code, out, errOut := run(t, "inspect", wasm)
	if code != 0 || out != `{"name":"orders-downgrade","kind":"transform","version":"1.0.0","abi":1,"abi_name":"streamd v1"}`+"\n" {
		t.Fatalf("inspect: exit %d, %q %q", code, out, errOut)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", wasm}, "missing --input"},
		{[]string{"test", wasm, "--input", fixtureIn}, "missing --expect"},
		{[]string{"run", "native:./no-such-plugin", "--input", fixtureIn}, "no-such-plugin"},
		{[]string{"run", "plugin.so", "--input", fixtureIn}, "want wasm:PATH, native:PATH or a path ending in .wasm"},
		{[]string{"run", wasm, "--input", fixtureIn, "--config", "[1]"}, "--config: not a JSON object"},
		{[]string{"run", wasm, "--input", fixtureIn, "--op", "encode"}, "is a transform, not a codec"},
		{[]string{"run", wasm, "--input", "nope.jsonl"}, "nope.jsonl"},
		{[]string{"frobnicate"}, `unknown subcommand "frobnicate"`},
	}
	for _, tt := range tests {
		var o, e bytes.Buffer
		code := plugincli.Main(context.Background(), tt.args, &o, &e, plugincli.OpenDefault)
		if code != 2 || !strings.Contains(e.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tt.args, code, e.String(), tt.want)
		}
	}
}

// TestPoisonIsolation: a batch that traps is retried one record at a time,
// and only the poison record becomes an error line, worded as its dead
// letter would be: the cause first, not the batch's failure.
func TestPoisonIsolation(t *testing.T) {
	wasm := testenv.ExampleWat(t, "poison")
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"value":"ok-1","offset":1}
{"value":"poison","offset":2}
{"value":"reject","offset":3}
{"value":"ok-4","offset":4}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "run", wasm, "--input", in)
	want := `{"value":"ok-1","partition":0,"offset":1}
{"error":"plugin crashed: wasm error: unreachable`
	if code != 0 || !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 4 ||
		!strings.Contains(out, `","kind":"trap","input_offset":2}`) ||
		!strings.Contains(out, `{"error":"rejected by poison.wat","kind":"rejected","input_offset":3}`) ||
		!strings.HasSuffix(out, `{"value":"ok-4","partition":0,"offset":4}`+"\n") {
		t.Fatalf("exit %d, stderr %s\n%s", code, errOut, out)
	}
}

// TestNativeDowngradeConformance runs the native Go orders-downgrade plugin
// (examples/native/go/orders-downgrade, built into a temp dir) over the
// conformance fixture through the same command.
func TestNativeDowngradeConformance(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "plugin")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = "../../../examples/native/go/orders-downgrade"
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	code, out, errOut := run(t, "test", "native:"+bin, "--input", fixtureIn, "--expect", fixtureExpected)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// FuzzCompare: Compare never panics on arbitrary expected and actual output.
func FuzzCompare(f *testing.F) {
	want, _ := os.ReadFile(fixtureExpected)
	f.Add(want, want)
	f.Add([]byte(`{"error":"x","input_offset":1}`), []byte(`{"written":true,"input_offset":1}`))
	f.Add([]byte(`{"error":"x","kind":"trap","input_offset":1}`), []byte(`{"error":"x"}`))
	f.Add([]byte(`{"key":"k","headers":{"a":null}}`), []byte(`{"key_b64":"AA==","offset":3}`))
	f.Fuzz(func(t *testing.T, got, want []byte) {
		diff, err := plugincli.Compare(got, want)
		if err == nil && diff == "" {
			// Equal: comparing want with itself must agree.
			if d, err := plugincli.Compare(want, want); err != nil || d != "" {
				t.Fatalf("want does not match itself: %q %v", d, err)
			}
		}
	})
}

// TestSinkWithDir: a Wasm sink writes into a directory granted with --dir;
// run prints a written line per durable record and an error line per
// rejected one.
func TestSinkWithDir(t *testing.T) {
	wasm := filepath.Join(tmpRoot, "file-sink.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", wasm, ".")
	cmd.Dir = "../../../examples/wasm/go/file-sink"
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"value":"one","offset":5}
{"value":"two\nlines","offset":6}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := run(t, "run", wasm, "--input", in, "--dir", "/out="+out, "--config", `{"path":"/out/r.txt"}`)
	want := `{"written":true,"input_offset":5}
{"error":"value contains a newline","kind":"rejected","input_offset":6}
`
	if code != 0 || stdout != want {
		t.Fatalf("exit %d, stderr %s\n%s", code, stderr, stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "r.txt")); string(b) != "one\n" {
		t.Fatalf("file holds %q", b)
	}
	if code, _, stderr := run(t, "run", wasm, "--input", in, "--dir", "nonsense"); code != 2 || !strings.Contains(stderr, "want GUEST=HOST") {
		t.Fatalf("bad --dir: exit %d %s", code, stderr)
	}
}
