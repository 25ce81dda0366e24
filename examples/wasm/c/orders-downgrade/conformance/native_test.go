package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestSDKNative runs the C SDK's native tests (sdk/c/test/run.sh: the
// SDK's tests built as a transform, a codec and a sink, test_lengths among
// them, then a fuzz run of the request decoder) with the host C compiler,
// AddressSanitizer and UBSan.
func TestSDKNative(t *testing.T) {
	runNative(t, "CC", "sdk/c/test/run.sh", filepath.Join(root(), "sdk", "c", "test", "run.sh"))
}

// TestNativeTests runs the downgrade's native tests (test.sh --native:
// downgrade_test.c, its every-position cases among them, and a fuzz run of
// fuzz.c) with the host C compiler, AddressSanitizer and UBSan. TestFixture
// runs the fixture that test.sh runs after them.
func TestNativeTests(t *testing.T) {
	runNative(t, "HOST_CC", "test.sh --native", filepath.Join(root(), "examples", "wasm", "c", "orders-downgrade", "test.sh"), "--native")
}

// root is the repository root.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "..")
}

// runNative runs a native test script. A missing host C compiler (ccVar,
// default cc), or one that cannot build with
// the sanitizers (the script then says "no sanitizers:"), fails under
// STREAMD_REQUIRE_ALL=1 and skips otherwise; a failing test fails with the
// script's output. Each fuzz run is FUZZ_SECONDS long, 1 unless set (the
// scripts' own default is 3).
func runNative(t *testing.T, ccVar, name, script string, args ...string) {
	cc := os.Getenv(ccVar)
	if cc == "" {
		cc = "cc"
	}
	testenv.Tool(t, cc)
	cmd := exec.Command("sh", append([]string{script}, args...)...)
	cmd.Env = os.Environ()
	if _, ok := os.LookupEnv("FUZZ_SECONDS"); !ok {
		cmd.Env = append(cmd.Env, "FUZZ_SECONDS=1")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	t.Logf("%s", out)
	if strings.Contains(string(out), "no sanitizers:") {
		testenv.Missing(t, "AddressSanitizer and UBSan for the host C compiler (gcc's libasan and libubsan: scripts/install-tools base)")
	}
}
