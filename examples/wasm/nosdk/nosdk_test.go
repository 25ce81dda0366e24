package nosdk_test

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
)

// TestPluginsWithoutSDK builds each example with its build.sh and runs
// `streamd plugin test` over its fixture, messages compared too; a missing
// compiler fails under STREAMD_REQUIRE_ALL=1 (scripts/install-tools wasm
// zig installs both) and skips otherwise.
func TestPluginsWithoutSDK(t *testing.T) {
	for _, tt := range []struct {
		dir     string
		missing string // what build.sh says when its compiler is missing
		what    string
	}{
		{"../zig/upper", "no Zig", "Zig (scripts/install-tools zig)"},
		{"../cpp/upper", "not found", "clang++ and libc++ for wasm32 (scripts/install-tools wasm)"},
	} {
		t.Run(filepath.Base(filepath.Dir(tt.dir)), func(t *testing.T) {
			dir, err := filepath.Abs(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			wasm := filepath.Join(dir, "plugin.wasm")
			_ = os.Remove(wasm)
			out, err := exec.Command(filepath.Join(dir, "build.sh")).CombinedOutput()
			if err != nil {
				if strings.Contains(string(out), tt.missing) || strings.Contains(string(out), "no libc++") {
					testenv.Missing(t, tt.what)
				}
				t.Fatalf("build.sh: %v\n%s", err, out)
			}
			var o, e bytes.Buffer
			code := plugincli.Main(context.Background(), []string{"test", wasm,
				"--input", filepath.Join(dir, "testdata", "in.jsonl"), "--expect", filepath.Join(dir, "testdata", "out.jsonl"),
				"--messages", "--cache", ""}, &o, &e, plugincli.OpenDefault)
			if code != 0 || !strings.HasPrefix(o.String(), "ok ") {
				t.Fatalf("plugin test: exit %d\n%s%s", code, o.String(), e.String())
			}
			t.Logf("%s%s", out, o.String())
		})
	}
}
