package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	rootOnce sync.Once
	root     string
	rootErr  error
	goBuilds sync.Map // examples/wasm/go dir -> func() (string, error)
)

// Main is a test package's TestMain: it runs m's tests with each *dir set
// to TempRoot, removes TempRoot after them, and exits with their code:
//
//	func TestMain(m *testing.M) { testenv.Main(m, &tmpRoot) }
func Main(m *testing.M, dirs ...*string) {
	if len(dirs) > 0 {
		d, err := tempRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
			os.Exit(1)
		}
		for _, p := range dirs {
			*p = d
		}
	}
	code := m.Run()
	if root != "" {
		_ = os.RemoveAll(root)
	}
	os.Exit(code)
}

func tempRoot() (string, error) {
	rootOnce.Do(func() { root, rootErr = os.MkdirTemp("", "streamd-test-") })
	return root, rootErr
}

// TempRoot is a directory the tests of this binary share (made at the
// first call; removed by Main).
func TempRoot(tb testing.TB) string {
	tb.Helper()
	d, err := tempRoot()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// ExampleGoWasm builds the Go guest in examples/wasm/go/DIR of this
// repository (GOOS=wasip1, -buildmode=c-shared) once per test binary, into
// TempRoot, and returns the .wasm file's path.
func ExampleGoWasm(tb testing.TB, dir string) string {
	tb.Helper()
	d := TempRoot(tb)
	f, _ := goBuilds.LoadOrStore(dir, sync.OnceValues(func() (string, error) {
		out := filepath.Join(d, "go-"+filepath.Base(dir)+".wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, ".")
		cmd.Dir = filepath.Join(Root(), "examples", "wasm", "go", dir)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build examples/wasm/go/%s: %v\n%s", dir, err, b)
		}
		return out, nil
	}))
	path, err := f.(func() (string, error))()
	if err != nil {
		tb.Fatal(err)
	}
	return path
}
