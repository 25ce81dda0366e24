package native_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins/load"
)

// TestPluginTestCommand runs `streamd plugin test native:...` (the command's
// code, with plugins/load.Open as the loader) on the Go and the Python
// orders-downgrade plugins against the conformance fixture; a fixture with
// one changed byte must fail.
func TestPluginTestCommand(t *testing.T) {
	const in, expect = "../../examples/wasm/testdata/orders-v2.jsonl", "../../examples/wasm/testdata/orders-v1.expected.jsonl"
	goBin := filepath.Join(t.TempDir(), "orders-downgrade")
	build := exec.Command("go", "build", "-o", goBin, "./examples/native/go/orders-downgrade")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	want, err := os.ReadFile(expect)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "broken.jsonl")
	if err := os.WriteFile(broken, bytes.Replace(want, []byte(`amount_cents\":`), []byte(`amount_cents\": `), 1), 0o644); err != nil {
		t.Fatal(err)
	}

	plugins := map[string]string{"go": goBin, "python": "../../examples/native/python/orders-downgrade/plugin"}
	for lang, path := range plugins {
		t.Run(lang, func(t *testing.T) {
			if lang == "python" {
				py := testenv.Tool(t, "python3")
				if out, err := exec.Command(py, "-c", "import grpc, grpc_health.v1.health").CombinedOutput(); err != nil {
					testenv.Missing(t, "python3 modules grpcio and grpcio-health-checking: "+strings.TrimSpace(string(out)))
				}
			}
			for _, tt := range []struct {
				expect string
				code   int
				out    string
			}{{expect, 0, "ok native:"}, {broken, 1, "FAIL native:"}} {
				var stdout, stderr bytes.Buffer
				code := plugincli.Main(context.Background(), []string{"test", "native:" + path, "--input", in, "--expect", tt.expect}, &stdout, &stderr, load.Open)
				if code != tt.code || !strings.HasPrefix(stdout.String(), tt.out) {
					t.Fatalf("streamd plugin test native:%s --expect %s: exit %d, want %d\nstdout: %s\nstderr: %s", path, tt.expect, code, tt.code, stdout.String(), stderr.String())
				}
				t.Logf("exit %d: %s", code, strings.SplitN(stdout.String(), "\n", 2)[0])
			}
		})
	}
}
