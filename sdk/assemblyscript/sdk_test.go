// Package assemblyscript_test runs the AssemblyScript SDK's Node tests from
// go test, so CI covers them: they need node and npm (testenv.Missing when
// absent).
package assemblyscript_test

import (
	"os/exec"
	"testing"

	"github.com/streamd/streamd/internal/testenv"
)

func TestSDK(t *testing.T) {
	testenv.Tool(t, "node")
	testenv.Tool(t, "npm")
	out, err := exec.Command("sh", "test.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("test.sh: %v\n%s", err, out)
	}
}
