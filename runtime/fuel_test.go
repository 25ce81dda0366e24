package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
	"github.com/streamd/streamd/runtime/internal/fuel"
)

// hostileDeadline bounds each test here that runs a guest in an endless
// loop, which only the host stops: right, each call ends just after the
// plugin's timeout; if the fuel checks or the timeout break, the test fails
// within seconds, naming the guest, not at go test's -timeout.
const hostileDeadline = 10 * time.Second

// stuckGrace is how long a call may go on past its test's deadline (the
// host then stops a fueled guest at its next refill) before it is given up
// on and left running.
const stuckGrace = 2 * time.Second

// errNotStopped: a guest ran until its test's deadline.
var errNotStopped = errors.New("not stopped by its timeout")

// childTest, in a child process's environment, names the test it runs
// (inChild).
const childTest = "STREAMD_RUNTIME_FUEL_CHILD"

// inChild runs the test t in a child process of this test binary, killed
// if it has not ended hostileDeadline+stuckGrace+10s from now, and reports
// whether it did (the caller then returns); in that child it returns false
// and the test runs. A guest loop that the fuel instrumentation left
// without a check cannot be stopped, nor preempted: wazero's compiled code
// has no safe point for Go's scheduler, so the next garbage collection
// waits for it forever, with the whole process (callWithin's timer
// included). Only a process outside can then fail the test, naming guest.
func inChild(t *testing.T, guest string) bool {
	t.Helper()
	return inChildFor(t, guest, hostileDeadline+stuckGrace+10*time.Second)
}

// inChildFor is inChild with the child's time limit.
func inChildFor(t *testing.T, guest string, limit time.Duration) bool {
	t.Helper()
	if os.Getenv(childTest) == t.Name() {
		return false
	}
	run := strings.Split(t.Name(), "/")
	for i, p := range run {
		run[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", strings.Join(run, "/"), "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childTest+"="+t.Name())
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s: %v: the test's process did not end within %v (a guest loop without a fuel check?) and was killed; its output:\n%s",
			guest, errNotStopped, limit, out)
	case err != nil:
		t.Fatalf("%s: the test failed in its child process: %v\n%s", guest, err, out)
	case bytes.Contains(out, []byte("--- SKIP: "+t.Name()+" ")):
		t.Skipf("skipped in its child process:\n%s", out)
	case !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")):
		t.Fatalf("%s: the child process did not run the test:\n%s", guest, out)
	}
	return true
}

// deadline returns the context for a test's calls of hostile guests, which
// ends hostileDeadline from now.
func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hostileDeadline)
	t.Cleanup(cancel)
	return ctx
}

// loadHostile loads path into h like load, and closes it when the test ends
// with a context that ends stuckGrace later: Close waits for calls still
// running, and a guest that callWithin left running never ends.
func loadHostile(t *testing.T, h *runtime.Host, path string, opts plugins.Options) *runtime.Module {
	t.Helper()
	if opts.Wasm.CacheDir == "" {
		opts.Wasm.CacheDir = filepath.Join(tmpRoot, "cache")
	}
	m, err := h.Load(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stuckGrace)
		defer cancel()
		testenv.Close(t, ctx, m)
	})
	return m
}

// callWithin calls m's transform with in under ctx (deadline); guest names
// the plugin in messages. A call still running at ctx's end returns
// errNotStopped, whether the host then stops it or it is still running
// stuckGrace later (it is then left running).
func callWithin(ctx context.Context, m *runtime.Module, guest string, in []record.Record) ([]plugins.Result, error) {
	type result struct {
		res []plugins.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := m.Call(ctx, runtime.OpTransform, in)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		if ctx.Err() == nil {
			return r.res, r.err
		}
		return nil, fmt.Errorf("%s: %w: it ran until the test's %v deadline (then: %v)", guest, errNotStopped, hostileDeadline, r.err)
	case <-ctx.Done():
	}
	select {
	case r := <-done:
		return nil, fmt.Errorf("%s: %w: it ran until the test's %v deadline (then: %v)", guest, errNotStopped, hostileDeadline, r.err)
	case <-time.After(stuckGrace):
		return nil, fmt.Errorf("%s: %w: still running %v after the test's %v deadline (left running)", guest, errNotStopped, stuckGrace, hostileDeadline)
	}
}

// TestFuelTimeoutIsPrompt: an instrumented guest in an endless loop stops
// right after its timeout, call after call.
func TestFuelTimeoutIsPrompt(t *testing.T) {
	if inChild(t, "misbehave.wat (mode loop)") {
		return
	}
	m := loadHostile(t, newHost(t), wat(t, "misbehave"), plugins.Options{Pool: 1, Timeout: 200 * time.Millisecond, Config: map[string]any{"mode": "loop"}})
	ctx := deadline(t)
	for range 3 {
		start := time.Now()
		_, err := callWithin(ctx, m, "misbehave.wat (mode loop)", recs("a"))
		if errors.Is(err, errNotStopped) {
			t.Fatal(err)
		}
		if !errors.Is(err, runtime.ErrBatch) {
			t.Fatalf("err %v, want ErrBatch", err)
		}
		// The guest is stopped within a refill (microseconds) of the
		// deadline; allow for a busy machine.
		if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
			t.Fatalf("call ended after %v, want just after the 200ms timeout", d)
		}
	}
}

// TestFuelCache: with a cache directory the instrumented module is kept,
// and a damaged copy is rewritten rather than used.
func TestFuelCache(t *testing.T) {
	dir := t.TempDir()
	path := wat(t, "identity")
	h := newHost(t)
	ctx := context.Background()
	loadIt := func() {
		t.Helper()
		m, err := h.Load(ctx, path, plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{CacheDir: dir}})
		if err != nil {
			t.Fatal(err)
		}
		defer testenv.Close(t, ctx, m)
		res, err := m.Call(ctx, runtime.OpTransform, recs("a", "b"))
		if err != nil || len(res) != 2 {
			t.Fatalf("call: %v %+v", err, res)
		}
	}
	loadIt()
	files, _ := filepath.Glob(filepath.Join(dir, "fuel", "*.wasm"))
	if len(files) != 1 {
		t.Fatalf("fuel cache holds %v, want one file", files)
	}
	good, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, damaged := range [][]byte{good[:len(good)/2], append([]byte("\x00asm\x01\x00\x00\x00garbage"), good[len(good)-4:]...), nil} {
		if err := os.WriteFile(files[0], damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		loadIt()
		if b, _ := os.ReadFile(files[0]); string(b) != string(good) {
			t.Fatalf("damaged cache file (%d bytes) not rewritten", len(damaged))
		}
	}
}

// TestFuelFallbackLogged: a module the fuel instrumentation cannot read
// still loads and its timeout still stops it (wazero's own checks), and
// the host says so in one warning naming the plugin and the reason, since
// its code then runs 2-10x slower. A module it reads logs nothing of the
// kind. Before, the fallback was silent.
func TestFuelFallbackLogged(t *testing.T) {
	path := wat(t, "misbehave")
	for _, tc := range []struct {
		name     string
		rewrite  func([]byte, fuel.Options) ([]byte, error)
		wantWarn bool
	}{
		{"unreadable", func([]byte, fuel.Options) ([]byte, error) {
			return nil, fmt.Errorf("%w: opcode 0xfd 300 at offset 77", fuel.ErrUnsupported)
		}, true},
		{"readable", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if inChild(t, "misbehave.wat (mode loop, "+tc.name+")") {
				return
			}
			var buf bytes.Buffer
			h := newHost(t)
			if tc.rewrite != nil {
				runtime.SetRewrite(h, tc.rewrite)
			}
			m := loadHostile(t, h, path, plugins.Options{Pool: 1, Timeout: 200 * time.Millisecond, Config: map[string]any{"mode": "loop"},
				Logger: slog.New(slog.NewTextHandler(&buf, nil)), Wasm: plugins.WasmOptions{CacheDir: t.TempDir()}})
			start := time.Now()
			_, err := callWithin(deadline(t), m, "misbehave.wat (mode loop, "+tc.name+")", recs("a"))
			if errors.Is(err, errNotStopped) {
				t.Fatal(err)
			}
			if !errors.Is(err, runtime.ErrBatch) {
				t.Fatalf("err %v, want ErrBatch (the timeout)", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the looping guest was stopped after %v, want about its 200ms timeout", d)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if strings.Contains(l, "fuel") {
					lines = append(lines, l)
				}
			}
			if !tc.wantWarn {
				if len(lines) != 0 {
					t.Fatalf("fueled load logged %q", lines)
				}
				return
			}
			if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "plugin="+path) ||
				!strings.Contains(lines[0], "opcode 0xfd 300 at offset 77") || !strings.Contains(lines[0], "slower") {
				t.Fatalf("log lines about fuel %q, want one warning naming plugin=%s, the reason and the slower checks", lines, path)
			}
			t.Log(lines[0])
		})
	}
}
