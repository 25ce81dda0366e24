package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
)

// guestTime asks the probe for its wall-clock and monotonic time.
func guestTime(t *testing.T, m *runtime.Module) (time.Time, time.Duration) {
	t.Helper()
	out := probe(t, m, "time")[0]
	f := strings.Fields(strings.TrimPrefix(out, "ok:"))
	if !strings.HasPrefix(out, "ok:") || len(f) != 2 {
		t.Fatalf("time: %s", out)
	}
	wall, err1 := strconv.ParseInt(f[0], 10, 64)
	mono, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("time: %s", out)
	}
	return time.Unix(0, wall), time.Duration(mono)
}

// TestClockGrant: without the clock grant a guest
// sees the documented fake clock (2022-01-01, 1 ms per reading, sleeps
// that return at once) and streamd says so at load; with it, the host's
// real wall-clock and monotonic time, and sleeps that sleep.
func TestClockGrant(t *testing.T) {
	fake := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

	t.Run("without", func(t *testing.T) {
		var log bytes.Buffer
		m := load(t, probePlugin(t), plugins.Options{Pool: 1, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		wall, _ := guestTime(t, m)
		if wall.Before(fake) || wall.After(fake.Add(time.Minute)) {
			t.Errorf("wall clock without the grant %v, want the fake clock at %v", wall, fake)
		}
		if out := probe(t, m, "sleep 60000")[0]; !strings.HasPrefix(out, "ok:") {
			t.Errorf("sleep without the grant: %s", out) // returns at once, or this test would hang
		}
		if !strings.Contains(log.String(), "without the clock grant") {
			t.Errorf("nothing logged about the fake clock: %q", log.String())
		}
	})

	t.Run("with", func(t *testing.T) {
		var log bytes.Buffer
		m := load(t, probePlugin(t), plugins.Options{Pool: 1, Logger: slog.New(slog.NewTextHandler(&log, nil)), Wasm: plugins.WasmOptions{Clock: true}})
		before := time.Now()
		wall, mono1 := guestTime(t, m)
		after := time.Now()
		if wall.Before(before.Add(-time.Second)) || wall.After(after.Add(time.Second)) {
			t.Errorf("wall clock with the grant %v, want between %v and %v", wall, before, after)
		}
		const nap = 100 * time.Millisecond
		start := time.Now()
		out := probe(t, m, "sleep "+strconv.Itoa(int(nap/time.Millisecond)))[0]
		took := time.Since(start)
		slept, err := strconv.ParseInt(strings.TrimPrefix(out, "ok:"), 10, 64)
		if err != nil || time.Duration(slept) < nap || took < nap {
			t.Errorf("sleep %v with the grant: guest measured %s, host %v", nap, out, took)
		}
		_, mono2 := guestTime(t, m)
		if mono2-mono1 < nap {
			t.Errorf("monotonic clock advanced %v across a %v sleep", mono2-mono1, nap)
		}
		if strings.Contains(log.String(), "without the clock grant") {
			t.Errorf("fake clock logged with the grant: %q", log.String())
		}
	})
}

// TestSleepEndsWithTheCall: a sleep under the clock grant cannot outlive
// its call's timeout or the caller's context.
func TestSleepEndsWithTheCall(t *testing.T) {
	m := load(t, probePlugin(t), plugins.Options{Pool: 1, Timeout: 300 * time.Millisecond, Wasm: plugins.WasmOptions{Clock: true}})
	start := time.Now()
	_, err := m.Call(context.Background(), runtime.OpTransform, []record.Record{{Value: []byte("sleep 600000")}})
	if !errors.Is(err, runtime.ErrBatch) || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Fatalf("a 10-minute sleep with a 300ms timeout: %v", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the call took %v", took)
	}

	m = load(t, probePlugin(t), plugins.Options{Pool: 1, Timeout: time.Hour, Wasm: plugins.WasmOptions{Clock: true}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err = m.Call(ctx, runtime.OpTransform, []record.Record{{Value: []byte("sleep 600000")}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a 10-minute sleep, cancelled: %v", err)
	}
	// The module serves the next call.
	if out := probe(t, m, "sleep 1")[0]; !strings.HasPrefix(out, "ok:") {
		t.Fatalf("after the cancelled call: %s", out)
	}
}

// TestRandomGrant: every instance and every run gets
// its own random bytes (crypto/rand) unless DeterministicRandom asks for
// wazero's fixed sequence.
func TestRandomGrant(t *testing.T) {
	// Two draws from each of two instances (each load makes a fresh one).
	draw := func(opts plugins.Options) []string {
		return probe(t, load(t, probePlugin(t), opts), "rand 32", "rand 32")
	}
	a, b := draw(plugins.Options{Pool: 1}), draw(plugins.Options{Pool: 1})
	for _, x := range append(a, b...) {
		if !strings.HasPrefix(x, "ok:") || len(x) != 3+64 {
			t.Fatalf("rand 32: %s", x)
		}
	}
	if a[0] == b[0] || a[1] == b[1] || a[0] == a[1] {
		t.Errorf("two instances drew the same bytes: %v, %v", a, b)
	}
	c, d := draw(plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{DeterministicRandom: true}}), draw(plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{DeterministicRandom: true}})
	if c[0] != d[0] || c[1] != d[1] {
		t.Errorf("DeterministicRandom gave different bytes: %v, %v", c, d)
	}
}

// TestNothingElseByDefault: what docs/abi.md section 11 says a guest gets
// without grants: no arguments, no environment, an empty stdin, no file
// system and no socket (WASI preview 1 cannot open one; the preopened
// directory of a grant is not one either).
func TestNothingElseByDefault(t *testing.T) {
	m := load(t, probePlugin(t), plugins.Options{Pool: 1})
	got := probe(t, m, "args", "env", "stdin", "read /etc/passwd", "ls /", "sock 0", "sock 3")
	want := []string{"ok:0 0", "ok:0 0", "ok:0", "err:", "err:", "err:accept ", "err:accept "}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) || (want[i] == "err:" && leaked(got[i])) {
			t.Errorf("%d: %s, want %s...", i, got[i], want[i])
		}
	}
	// proc_exit, even with status 0, fails the call; the next one gets a
	// new instance.
	for _, code := range []string{"0", "3"} {
		_, err := m.Call(context.Background(), runtime.OpTransform, []record.Record{{Value: []byte("exit " + code)}})
		if !errors.Is(err, runtime.ErrBatch) {
			t.Errorf("exit %s: %v", code, err)
		}
		if out := probe(t, m, "args")[0]; out != "ok:0 0" {
			t.Errorf("after exit %s: %s", code, out)
		}
	}
	m = load(t, probePlugin(t), plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Dirs: map[string]string{"/d": t.TempDir()}}})
	if out := probe(t, m, "sock 3")[0]; !strings.HasPrefix(out, "err:accept ") {
		t.Errorf("sock_accept on a preopened directory: %s", out)
	}
}
