// Package conformance runs the shared guest conformance suite
// (examples/wasm/internal/guesttest) against the Go orders-downgrade plugin
// built with the Go SDK: the fixture through `streamd plugin test`, the
// manifest, the identity plugin (examples/wasm/go/identity) with records of
// every shape, and FuzzDowngrade, the differential fuzz of the Wasm plugin (the
// SDK's request decoding and reply encoding included) against the same Go
// downgrade run natively.
package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/streamd/streamd/examples/wasm/internal/guesttest"
	"github.com/streamd/streamd/internal/tests/testenv"
)

var suite = guesttest.New(guesttest.Lang{
	Name:      "Go",
	Dir:       "go",
	Tools:     func(tb testing.TB) { testenv.Tool(tb, "go") },
	Downgrade: func(dir, out string) []string { return goBuild(dir, out) },
	Identity:  func(dir, out string) []string { return goBuild(filepath.Join(dir, "..", "identity"), out) },
})

// goBuild is the command that builds the Go plugin in dir to out, as its
// build.sh does.
func goBuild(dir, out string) []string {
	return []string{"env", "GOOS=wasip1", "GOARCH=wasm", "go", "-C", dir,
		"build", "-buildmode=c-shared", "-trimpath", "-o", out, "."}
}

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
