package conformance

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
)

// modernRustc is the rustc of scripts/install-tools rust-web (Debian's
// rustc-web, with a wasm32-wasip1 std built from source), or calls Missing.
func modernRustc(t *testing.T) string {
	dir := os.Getenv("STREAMD_RUST_WEB")
	if dir == "" {
		dir = "/opt/streamd-rust-web"
	}
	rustc := filepath.Join(dir, "bin", "rustc")
	if _, err := os.Stat(rustc); err != nil {
		testenv.Missing(t, "rustc-web in "+dir+" (scripts/install-tools rust-web)")
	}
	return rustc
}

// TestModernRust: the SDK claims Rust 1.63 and later (Cargo.toml's
// rust-version); the tests above use Debian's 1.63, this one a current
// Rust (rustc-web 1.96): the SDK's and the downgrade's tests natively, and
// the downgrade plugin built for wasm32-wasip1, which must pass the
// conformance fixture under streamd's runtime.
func TestModernRust(t *testing.T) {
	rustc := modernRustc(t)
	v, err := exec.Command(rustc, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", v)
	t.Run("sdk native", func(t *testing.T) {
		runRustTestsWith(t, rustc, "the SDK's tests", filepath.Join(root(), "sdk", "rust", "src", "lib.rs"))
	})
	t.Run("downgrade native", func(t *testing.T) {
		runRustTestsWith(t, rustc, "the downgrade's tests", filepath.Join(root(), "examples", "wasm", "rust", "orders-downgrade", "src", "downgrade.rs"))
	})
	t.Run("plugin", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "plugin.wasm")
		build := exec.Command(filepath.Join(root(), "examples", "wasm", "rust", "build-plugin.sh"),
			filepath.Join(root(), "examples", "wasm", "rust", "orders-downgrade"), out)
		build.Env = append(os.Environ(), "RUSTC="+rustc, "WASM_TARGET=")
		msg, err := build.CombinedOutput()
		if err != nil || !strings.Contains(string(msg), "wasm32-wasip1") {
			t.Fatalf("build-plugin.sh with %s: %v\n%s", rustc, err, msg)
		}
		ctx := context.Background()
		p, err := plugincli.OpenDefault(ctx, "wasm:"+out, plugins.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Close(ctx) }()
		f, err := os.Open(filepath.Join(root(), "examples", "wasm", "testdata", "orders-v2.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		recs, err := plugincli.DecodeRecords(f, "orders-v2.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := plugincli.Run(ctx, p, plugincli.RunOptions{}, recs, &got); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(root(), "examples", "wasm", "testdata", "orders-v1.expected.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if diff, err := plugincli.Compare(got.Bytes(), want); err != nil || diff != "" {
			t.Fatalf("the fixture, built with %s: %v\n%s", v, err, diff)
		}
	})
}
