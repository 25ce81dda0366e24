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

// TestSDKNative runs the Rust SDK's own tests (sdk/rust/src/tests.rs,
// rustc --test) natively.
func TestSDKNative(t *testing.T) {
	runRustTests(t, "the SDK's tests", filepath.Join(root(), "sdk", "rust", "src", "lib.rs"))
}

// TestDowngradeTestsNative runs the downgrade's own Rust tests
// (src/downgrade.rs, its #[cfg(test)] module: the every-position cases, the
// oracle's, fuzz_no_panic) natively, where its 16-byte scans are SSE2.
// STREAMD_FUZZ_RUNS passes through to fuzz_no_panic (default 50000).
func TestDowngradeTestsNative(t *testing.T) {
	runRustTests(t, "the downgrade's tests", filepath.Join(root(), "examples", "wasm", "rust", "orders-downgrade", "src", "downgrade.rs"))
}

// root is the repository root.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "..")
}

// runRustTests builds src's tests with rustc --test for the host and runs
// them. opt-level 1 with debug assertions and overflow checks on: the checks
// of a debug build, the every-position loops ~17x faster than opt-level 0
// (18 s -> 1 s). A missing rustc fails under STREAMD_REQUIRE_ALL=1 and skips
// otherwise; a failing Rust test fails it with the test's name and
// panic.
func runRustTests(t *testing.T, what, src string) {
	// Debian's rustc, as build-plugin.sh prefers, else rustc on PATH.
	rustc := "/usr/bin/rustc"
	if _, err := os.Stat(rustc); err != nil {
		rustc = testenv.Tool(t, "rustc")
	}
	runRustTestsWith(t, rustc, what, src)
}

// runRustTestsWith is runRustTests with the compiler rustc.
func runRustTestsWith(t *testing.T, rustc, what, src string) {
	bin := filepath.Join(t.TempDir(), "test")
	build := exec.Command(rustc, "--edition", "2021", "--test", "-C", "opt-level=1",
		"-C", "debug-assertions=on", "-C", "overflow-checks=on", src, "-o", bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", what, err, out)
	}
	out, err := exec.Command(bin, "--test-threads=1").CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	if !strings.Contains(string(out), "test result: ok.") {
		t.Fatalf("%s said no \"test result: ok.\":\n%s", what, out)
	}
	t.Logf("%s", out)
}
