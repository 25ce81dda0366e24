package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/streamd/streamd/examples/wasm/internal/guesttest"
	"github.com/streamd/streamd/internal/tests/testenv"
)

var suite = guesttest.New(guesttest.Lang{
	Name: "C",
	Dir:  "c",
	Tools: func(tb testing.TB) {
		testenv.Tool(tb, "clang")
		testenv.Tool(tb, "wasm-ld")
	},
	Downgrade: func(dir, out string) []string {
		return []string{filepath.Join(dir, "..", "build-plugin.sh"), out,
			filepath.Join(dir, "plugin.c"), filepath.Join(dir, "downgrade.c")}
	},
	Identity: func(dir, out string) []string {
		return []string{filepath.Join(dir, "..", "build-plugin.sh"), out,
			filepath.Join(dir, "..", "identity", "identity.c")}
	},
	MissingMarker: "sysroot is missing",
	MissingWhat:   "wasi-libc (run scripts/install-tools)",
})

func TestMain(m *testing.M) {
	code := m.Run()
	suite.Cleanup()
	os.Exit(code)
}

func TestFixture(t *testing.T)        { suite.TestFixture(t) }
func TestManifest(t *testing.T)       { suite.TestManifest(t) }
func TestIdentity(t *testing.T)       { suite.TestIdentity(t) }
func FuzzDowngrade(f *testing.F)      { suite.FuzzDowngrade(f) }
func BenchmarkDowngrade(b *testing.B) { suite.BenchmarkDowngrade(b) }
func BenchmarkIdentity(b *testing.B)  { suite.BenchmarkIdentity(b) }
