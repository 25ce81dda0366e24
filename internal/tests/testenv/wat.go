package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Wat2Wasm compiles the WAT file in into the Wasm file out with wat2wasm
// (found by Tool: a skip, or a failure under STREAMD_REQUIRE_ALL, when it
// is missing); extra are more wat2wasm flags, such as --debug-names. A
// compile error fails tb with the tool's output.
func Wat2Wasm(tb testing.TB, in, out string, extra ...string) {
	tb.Helper()
	args := append(append([]string{}, extra...), in, "-o", out)
	if b, err := exec.Command(Tool(tb, "wat2wasm"), args...).CombinedOutput(); err != nil {
		tb.Fatalf("wat2wasm %s: %v\n%s", in, err, b)
	}
}

// ExampleWat compiles examples/wasm/wat/NAME.wat of this repository into
// tb's temp dir and returns the .wasm file's path.
func ExampleWat(tb testing.TB, name string) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), strings.TrimSuffix(name, ".wat")+".wasm")
	Wat2Wasm(tb, filepath.Join(Root(), "examples", "wasm", "wat", strings.TrimSuffix(name, ".wat")+".wat"), out)
	return out
}

// Root is the repository's root directory: the nearest directory above the
// test's working directory (its package's) whose go.mod is streamd's.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/streamd/streamd\n") {
			return d
		}
		if filepath.Dir(d) == d {
			panic("testenv: no streamd go.mod above " + dir)
		}
	}
}

// ProbeBound is the longest a liveness probe of a process under test may
// take: 100 ms, or 500 ms while the machine's 1-minute load average is at
// least its number of processors (where any process waits that long for
// a processor now and then). A process that stops answering (a garbage
// collection that waits on code that cannot be preempted) exceeds either
// by seconds.
func ProbeBound() time.Duration {
	if loaded() >= 1 {
		return 500 * time.Millisecond
	}
	return 100 * time.Millisecond
}

// AnswerBound is d, the longest a request to a process under test may take
// to be answered, scaled by how overloaded the machine is now: d while the
// 1-minute load average is under the number of processors, d times the
// load per processor above that (at most 10 d). A request that is never
// answered (a lock held while waiting) exceeds it by its whole timeout;
// a command started at a load of 20 on 2 cores waits seconds for a
// processor before it sends anything.
func AnswerBound(d time.Duration) time.Duration {
	return time.Duration(float64(d) * min(max(loaded(), 1), 10))
}

// loaded is the 1-minute load average per processor, or 0 if unknown.
func loaded() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		if load, err := strconv.ParseFloat(f[0], 64); err == nil {
			return load / float64(runtime.NumCPU())
		}
	}
	return 0
}
