package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/streamd/streamd/examples/wasm/internal/guesttest"
	"github.com/streamd/streamd/internal/testenv"
)

var suite = guesttest.New(guesttest.Lang{
	Name: "Rust",
	Dir:  "rust",
	Tools: func(tb testing.TB) {
		if _, err := os.Stat("/usr/bin/rustc"); err != nil {
			testenv.Tool(tb, "rustc")
		}
	},
	Downgrade: func(dir, out string) []string {
		return []string{filepath.Join(dir, "..", "build-plugin.sh"), dir, out}
	},
	Identity: func(dir, out string) []string {
		return []string{filepath.Join(dir, "..", "build-plugin.sh"), filepath.Join(dir, "..", "identity"), out}
	},
	MissingMarker: "has no standard library",
	MissingWhat:   "libstd-rust-dev-wasm32 (run scripts/install-tools)",
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
