// Package conformance runs the shared guest conformance suite
// (examples/wasm/internal/guesttest) against the Go orders-downgrade plugin
// built with the Go SDK: the fixture through `streamd plugin test`, the
// manifest, and FuzzDowngrade, the differential fuzz of the Wasm plugin (the
// SDK's request decoding and reply encoding included) against the same Go
// downgrade run natively.
package conformance

import (
	"os"
	"testing"

	"github.com/streamd/streamd/examples/wasm/internal/guesttest"
	"github.com/streamd/streamd/internal/testenv"
)

var suite = guesttest.New(guesttest.Lang{
	Name:  "Go",
	Dir:   "go",
	Tools: func(tb testing.TB) { testenv.Tool(tb, "go") },
	Downgrade: func(dir, out string) []string {
		return []string{"env", "GOOS=wasip1", "GOARCH=wasm", "go", "-C", dir,
			"build", "-buildmode=c-shared", "-trimpath", "-o", out, "."}
	},
})

func TestMain(m *testing.M) {
	code := m.Run()
	suite.Cleanup()
	os.Exit(code)
}

func TestFixture(t *testing.T)   { suite.TestFixture(t) }
func TestManifest(t *testing.T)  { suite.TestManifest(t) }
func FuzzDowngrade(f *testing.F) { suite.FuzzDowngrade(f) }
