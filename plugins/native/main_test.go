package native

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// binDir holds the plugin binaries the tests build once.
var binDir string

func TestMain(m *testing.M) { testenv.Main(m, &binDir) }

var builds sync.Map // package -> *buildResult

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// buildPlugin builds the Go main package pkg (relative to the module root)
// once per test binary and returns the executable's path.
func buildPlugin(t testing.TB, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		b.path = filepath.Join(binDir, filepath.Base(pkg)+fmt.Sprintf("-%p", b))
		cmd := exec.Command("go", "build", "-o", b.path, "./"+pkg)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func testPlugin(t testing.TB) string {
	return buildPlugin(t, "plugins/native/internal/testplugin")
}
