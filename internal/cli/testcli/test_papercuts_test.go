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

// brokerFreeConfig has no [kafka] at all: a pipeline test runs without a
// broker, so none is asked for.
const brokerFreeConfig = `[[pipeline]]
name = "p"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
path = "identity.wasm"
[pipeline.sink]
type = "kafka"
topic = "out"
[[pipeline.test]]
input = "in.jsonl"
output = "out.jsonl"
`

// TestPipelineTestPapercuts: a config without kafka.brokers or
// [kafka.embedded] runs its tests (they use no broker); an expected file
// that does not exist yet is named with the command that writes it.
func TestPipelineTestPapercuts(t *testing.T) {
	dir := t.TempDir()
	testenv.Wat2Wasm(t, "../../../examples/wasm/wat/identity.wat", filepath.Join(dir, "identity.wasm"))
	config := filepath.Join(dir, "streamd.toml")
	for name, text := range map[string]string{"streamd.toml": brokerFreeConfig, "in.jsonl": `{"value":"a","offset":1}` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := Main(context.Background(), args, &o, &e)
		return code, o.String(), e.String()
	}

	// out.jsonl does not exist yet.
	code, out, errOut := run(config)
	want := "streamd test --update " + config
	if code != 2 || !strings.Contains(errOut, "out.jsonl") || !strings.Contains(errOut, want) {
		t.Fatalf("missing expected file: exit %d, want 2 and %q\n%s%s", code, want, out, errOut)
	}
	if code, out, errOut := run("--update", config); code != 0 {
		t.Fatalf("--update: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run(config); code != 0 || !strings.HasPrefix(out, "ok ") {
		t.Fatalf("after --update: exit %d\n%s%s", code, out, errOut)
	}
}
