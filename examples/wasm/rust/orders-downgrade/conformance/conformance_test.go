package conformance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/streamd/streamd/examples/wasm/internal/guesttest"
	"github.com/streamd/streamd/internal/tests/testenv"
)

var suite = guesttest.New(guesttest.Lang{
	Name:  "Rust",
	Dir:   "rust",
	Tools: tools,
	Downgrade: func(dir, out string) []string {
		return []string{filepath.Join(dir, "..", "build-plugin.sh"), dir, out}
	},
	Identity: func(dir, out string) []string {
		return []string{filepath.Join(dir, "..", "build-plugin.sh"), filepath.Join(dir, "..", "identity"), out}
	},
	MissingMarker: missingMarker,
	MissingWhat:   missingWhat,
})

// What build-plugin.sh says when rustc has no Wasm standard library, and
// what that is missing.
const (
	missingMarker = "has no standard library"
	missingWhat   = "libstd-rust-dev-wasm32 (run scripts/install-tools)"
)

// tools checks for rustc (build-plugin.sh prefers Debian's, /usr/bin/rustc).
func tools(tb testing.TB) {
	if _, err := os.Stat("/usr/bin/rustc"); err != nil {
		testenv.Tool(tb, "rustc")
	}
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

// TestDowngradeTestsUnderWazero runs the downgrade's own Rust tests
// (src/downgrade.rs, its #[cfg(test)] module) built for Wasm with the
// plugin's optimization and features (its 16-byte scans are Wasm SIMD there,
// SSE2 natively: natively the same tests do not reach that code) under
// wazero, the engine streamd runs plugins with, as a WASI command.
// STREAMD_FUZZ_RUNS passes through to the tests' fuzz_no_panic.
func TestDowngradeTestsUnderWazero(t *testing.T) {
	tools(t)
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..")
	out := filepath.Join(t.TempDir(), "downgrade_test.wasm")
	build := exec.Command(filepath.Join(dir, "..", "build-plugin.sh"), "--wasm-test",
		filepath.Join(dir, "src", "downgrade.rs"), out)
	if msg, err := build.CombinedOutput(); err != nil {
		if strings.Contains(string(msg), missingMarker) {
			testenv.Missing(t, missingWhat)
		}
		t.Fatalf("building the tests: %v\n%s", err, msg)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// A hang fails here, not at go test's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer func() { _ = rt.Close(ctx) }()
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	// One thread (Wasm has no other) and no capture: a failing test
	// aborts the module (panic=abort), and the output then ends with its
	// name and panic message.
	var output bytes.Buffer
	cfg := wazero.NewModuleConfig().WithArgs("downgrade_test", "--test-threads=1", "--nocapture").
		WithStdout(&output).WithStderr(&output).
		WithSysWalltime().WithSysNanotime()
	if runs, ok := os.LookupEnv("STREAMD_FUZZ_RUNS"); ok {
		cfg = cfg.WithEnv("STREAMD_FUZZ_RUNS", runs)
	}
	_, err = rt.InstantiateWithConfig(ctx, wasm, cfg)
	var exit *sys.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 0 {
		err = nil
	}
	if err != nil {
		t.Fatalf("the downgrade's tests under wazero: %v\n%s", err, output.String())
	}
	if !strings.Contains(output.String(), "test result: ok.") {
		t.Fatalf("the downgrade's tests under wazero said no \"test result: ok.\":\n%s", output.String())
	}
	t.Logf("%s", output.String())
}
