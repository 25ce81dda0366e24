package plugincli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestNewOutsideCheckout: `streamd plugin new` run by a streamd binary that
// is not in a checkout, in a folder that is not in one, with no
// STREAMD_SDK, writes the SDK that is in the binary into the project
// (streamd-sdk/), and the two commands it prints build the plugin and pass
// its test, for each language. (Before the SDKs were embedded it stopped
// with "cannot find the streamd SDKs".)
func TestNewOutsideCheckout(t *testing.T) {
	dir, err := buildStreamd()
	if err != nil {
		t.Fatal(err)
	}
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The binary in a folder of its own: findSDK looks next to it and
	// above it.
	root := t.TempDir()
	binDir := filepath.Join(root, "usr", "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "streamd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(binDir, "streamd"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "home")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STREAMD_SDK=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	sh := func(cmd string) (string, error) {
		c := exec.Command("sh", "-c", cmd)
		c.Dir, c.Env = work, env
		out, err := c.CombinedOutput()
		return string(out), err
	}
	for _, lang := range plugincli.NewLanguages {
		if lang == "wat" { // no SDK
			continue
		}
		t.Run(lang, func(t *testing.T) {
			for _, tool := range toolsOf[lang] {
				testenv.Tool(t, tool)
			}
			name := "out-" + lang
			out, err := sh("streamd plugin new --lang " + lang + " --kind transform " + name)
			if err != nil {
				t.Fatalf("plugin new: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 4 || !strings.Contains(lines[0], plugincli.EmbeddedSDKDir+"/") {
				t.Fatalf("plugin new printed:\n%s", out)
			}
			// Nothing in the project points into the checkout.
			err = filepath.WalkDir(filepath.Join(work, name), func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				if strings.Contains(string(b), checkout) {
					t.Errorf("%s names the checkout %s", p, checkout)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			build, test := strings.TrimSpace(lines[2]), strings.TrimSpace(lines[3])
			if out, err := sh(build + " && " + test + " --cache ''"); err != nil || !strings.Contains(out, "ok plugin.wasm: ") {
				t.Fatalf("%s && %s: %v\n%s", build, test, err, out)
			}
		})
	}
}
