package ordersdowngrade_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestNode runs the Node tests of the AssemblyScript examples (test.mjs next
// to each build.sh) against freshly built plugins.
func TestNode(t *testing.T) {
	node := testenv.Tool(t, "node")
	for _, dir := range []string{".", "../identity"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			pluginPath(t, dir)
			cmd := exec.Command(node, "--test", "test.mjs")
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("node --test in %s: %v\n%s", dir, err, out)
			}
		})
	}
}
