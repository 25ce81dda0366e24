package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// foreignBuilds runs each examples/wasm build.sh at most once per test
// binary.
var foreignBuilds sync.Map // dir -> func() error

// ForeignWasm returns the path of a module built by the build.sh of a
// folder of examples/wasm that builds modules of another host's ABI from
// their SDKs (redpanda/rust, redpanda/go, fluvio): DIR/NAME.wasm as `make
// examples` leaves it, or, when it is not there, as the build.sh (run
// once per test binary) makes it. A build that cannot run for want of a
// tool (the Rust of scripts/install-tools rust-web, the network to
// crates.io) calls Missing.
func ForeignWasm(tb testing.TB, dir, name string) string {
	tb.Helper()
	abs := filepath.Join(Root(), "examples", "wasm", dir)
	path := filepath.Join(abs, name+".wasm")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	f, _ := foreignBuilds.LoadOrStore(dir, sync.OnceValue(func() error {
		cmd := exec.Command("sh", filepath.Join(abs, "build.sh"))
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("examples/wasm/%s/build.sh: %v\n%s", dir, err, b)
		}
		return nil
	}))
	if err := f.(func() error)(); err != nil {
		Missing(tb, err.Error())
	}
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("examples/wasm/%s/build.sh made no %s.wasm", dir, name)
	}
	return path
}
