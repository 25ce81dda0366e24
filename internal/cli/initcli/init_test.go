package initcli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/cli/runcli"
	"github.com/streamd/streamd/internal/cli/testcli"
	"github.com/streamd/streamd/internal/tests/testenv"
)

var updateStarter = flag.Bool("update-starter", false, "write starter/plugins/upper.wat and .wasm from plugin new's WAT transform, and the starter's test outputs")

// TestStarterPlugin: the starter's plugin is `streamd plugin new --lang wat
// --kind transform upper`, and upper.wasm is upper.wat built by wat2wasm
// as that project's build.sh builds it (-update-starter writes both).
func TestStarterPlugin(t *testing.T) {
	files, err := plugincli.NewProject("upper", "wat", "transform", "", "streamd")
	if err != nil {
		t.Fatal(err)
	}
	wat := []byte(files["plugin.wat"])
	watPath := filepath.Join("starter", "plugins", "upper.wat")
	wasmPath := filepath.Join("starter", "plugins", "upper.wasm")
	if *updateStarter {
		if err := os.WriteFile(watPath, wat, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := os.ReadFile(watPath); err != nil || !bytes.Equal(got, wat) {
		t.Fatalf("%s is not plugin new's WAT transform (%v): go test ./internal/cli/initcli -run TestStarterPlugin -update-starter", watPath, err)
	}
	w2w := testenv.Tool(t, "wat2wasm")
	built := filepath.Join(t.TempDir(), "upper.wasm")
	if out, err := exec.Command(w2w, "--debug-names", watPath, "-o", built).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, out)
	}
	want, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if *updateStarter {
		if err := os.WriteFile(wasmPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		var o, e bytes.Buffer
		if code := testcli.Main(context.Background(), []string{"--update", filepath.Join("starter", "streamd.toml")}, &o, &e); code != 0 {
			t.Fatalf("streamd test --update: exit %d\n%s%s", code, o.String(), e.String())
		}
	}
	if got, err := os.ReadFile(wasmPath); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is not wat2wasm of upper.wat (%v): go test ./internal/cli/initcli -run TestStarterPlugin -update-starter", wasmPath, err)
	}
}

// TestInit: `streamd init DIR` writes a starter that lints and whose
// pipeline test passes, as it is, from any folder; --data-dir sets its
// data_dir; a folder in use and a data dir TOML cannot hold are refused.
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "starter")
	var o, e bytes.Buffer
	if code := Main(context.Background(), []string{dir}, &o, &e); code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, o.String(), e.String())
	}
	if !strings.Contains(o.String(), "run it:   streamd run -c "+filepath.Join(dir, "streamd.toml")) {
		t.Errorf("init printed %q", o.String())
	}
	for _, f := range []string{"streamd.toml", "README.md", "plugins/upper.wasm", "plugins/upper.wat", "testdata/orders.jsonl", "testdata/orders.upper.jsonl", "testdata/orders.dlq.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("init wrote no %s", f)
		}
	}
	cfg := filepath.Join(dir, "streamd.toml")
	o.Reset()
	e.Reset()
	if code := runcli.Lint(context.Background(), []string{"-c", cfg}, &o, &e); code != 0 {
		t.Fatalf("lint of the starter: exit %d\n%s%s", code, o.String(), e.String())
	}
	o.Reset()
	e.Reset()
	if code := testcli.Main(context.Background(), []string{cfg}, &o, &e); code != 0 {
		t.Fatalf("streamd test of the starter: exit %d\n%s%s", code, o.String(), e.String())
	}

	// --data-dir, as the packages and the image write it.
	sys := filepath.Join(t.TempDir(), "etc")
	if code := Main(context.Background(), []string{"--data-dir", "/var/lib/streamd", sys}, &o, &e); code != 0 {
		t.Fatalf("init --data-dir: exit %d\n%s", code, e.String())
	}
	b, err := os.ReadFile(filepath.Join(sys, "streamd.toml"))
	if err != nil || !strings.Contains(string(b), "\n"+`data_dir = "/var/lib/streamd"`) || strings.Contains(string(b), starterDataDir) {
		t.Errorf("init --data-dir /var/lib/streamd wrote:\n%s", b)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{dir}, "exists and is not empty"},
		{[]string{"--data-dir", `a"b`, filepath.Join(t.TempDir(), "x")}, "without quotes"},
		{[]string{}, "usage: streamd init"},
	} {
		o.Reset()
		e.Reset()
		if code := Main(context.Background(), tt.args, &o, &e); code != 2 || !strings.Contains(e.String(), tt.want) {
			t.Errorf("init %q: exit %d, %q; want 2 and %q", tt.args, code, e.String(), tt.want)
		}
	}
}
