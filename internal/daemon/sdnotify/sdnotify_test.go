package sdnotify

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamd/streamd/pipeline"
)

// socket is a NOTIFY_SOCKET the test listens on, as systemd does.
type socket struct {
	mu   sync.Mutex
	msgs []string
}

func listen(t *testing.T) *socket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	s := &socket{}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, string(buf[:n]))
			s.mu.Unlock()
		}
	}()
	return s
}

// lines returns every line received so far, and forgets them.
func (s *socket) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.msgs {
		out = append(out, strings.Split(m, "\n")...)
	}
	s.msgs = nil
	return out
}

func count(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestNotifier: READY=1 only once every pipeline is ready, and once;
// RELOADING=1 with MONOTONIC_USEC then READY=1 around a reload; watchdog
// pings every half interval while nothing is wedged, none while a pipeline
// is wedged (but not while one is merely stalled by a broker outage);
// STOPPING=1; STATUS= lines that say what is wrong. It runs on synctest's
// fake clock, so the pings are counted exactly: WATCHDOG_USEC 200 ms, a
// ping every 100 ms, checked every 50 ms. The socket itself is
// TestNotifySocket's.
func TestNotifier(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "notify")) // New needs one; send is replaced
	t.Setenv("WATCHDOG_USEC", "200000")                             // 200 ms
	synctest.Test(t, func(t *testing.T) {
		sock := &socket{}
		var mu sync.Mutex
		sts := []pipeline.Status{{Name: "a", State: pipeline.StateStarting}, {Name: "b", State: pipeline.StateRunning, Ready: true}}
		set := func(f func([]pipeline.Status)) { mu.Lock(); f(sts); mu.Unlock() }
		n := New(func() []pipeline.Status { mu.Lock(); defer mu.Unlock(); return append([]pipeline.Status(nil), sts...) }, nil)
		if n == nil || n.watchdog != 200*time.Millisecond || n.tick != 50*time.Millisecond {
			t.Fatalf("notifier %+v", n)
		}
		n.send = func(state string) error {
			sock.mu.Lock()
			defer sock.mu.Unlock()
			sock.msgs = append(sock.msgs, state)
			return nil
		}
		// sleep lets d pass on the fake clock and the notifier act on it.
		sleep := func(d time.Duration) { time.Sleep(d); synctest.Wait() }
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go n.Run(ctx)
		sleep(450 * time.Millisecond) // pings at 0, 100, ... 400 ms
		got := sock.take()
		if count(got, "READY=1") != 0 || count(got, "WATCHDOG=1") != 5 || count(got, "STATUS=a starting") != 1 {
			t.Fatalf("while a is starting: %q", got)
		}
		set(func(s []pipeline.Status) { s[0].State, s[0].Ready = pipeline.StateRunning, true })
		sleep(500 * time.Millisecond)
		got = sock.take()
		if count(got, "READY=1") != 1 || count(got, "STATUS=2 pipelines: 2 running") != 1 || count(got, "WATCHDOG=1") != 5 {
			t.Fatalf("once ready: %q", got)
		}
		// A stall with a known cause (broker down) keeps the pings.
		set(func(s []pipeline.Status) { s[0].Stalled, s[0].Ready = true, false })
		sleep(500 * time.Millisecond)
		if got = sock.take(); count(got, "WATCHDOG=1") != 5 || count(got, "READY=1") != 0 || count(got, "STATUS=a stalled") != 1 {
			t.Fatalf("stalled, not wedged: %q", got)
		}
		// Wedged: no pings, however long (several watchdog intervals).
		set(func(s []pipeline.Status) { s[0].Wedged = true })
		sleep(50 * time.Millisecond)
		sock.take()
		sleep(time.Second)
		if got = sock.take(); count(got, "WATCHDOG=1") != 0 {
			t.Fatalf("pinged while wedged: %q", got)
		}
		// The wedge ends: a ping at the next check, then every 100 ms.
		set(func(s []pipeline.Status) { s[0].Wedged, s[0].Stalled, s[0].Ready = false, false, true })
		sleep(500 * time.Millisecond)
		if got = sock.take(); count(got, "WATCHDOG=1") != 5 {
			t.Fatalf("after the wedge ended: %q, want 5 pings in 500 ms", got)
		}
		n.Reloading()
		n.Reloaded(errors.New("x.toml:3: pipeline[0].sourc: unknown key\nmore"))
		sleep(50 * time.Millisecond)
		got = sock.take()
		want := []string{"RELOADING=1", "MONOTONIC_USEC=", "READY=1", "STATUS=2 pipelines: 2 running, 0 paused; 0 records out; last reload refused: x.toml:3: pipeline[0].sourc: unknown key ..."}
		for _, w := range want {
			if count(got, w) != 1 {
				t.Fatalf("around a reload: want one %q in %q", w, got)
			}
		}
		n.Stopping()
		if got = sock.take(); count(got, "STOPPING=1") != 1 {
			t.Fatalf("stopping: %q", got)
		}
	})
}

// TestReadyDespiteFailedPipeline: a pipeline that failed while the others
// started (a plugin that did not load) does not hold READY=1 back, so
// systemd does not restart the healthy ones after TimeoutStartSec; its
// failure is in STATUS=. One still starting does.
func TestReadyDespiteFailedPipeline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sts   []pipeline.Status
		ready bool
		line  string
	}{
		{"failed beside ready", []pipeline.Status{{Name: "a", State: pipeline.StateFailed}, {Name: "b", State: pipeline.StateRunning, Ready: true}}, true, "a failed; 2 pipelines: 1 running"},
		{"the only one failed", []pipeline.Status{{Name: "a", State: pipeline.StateFailed}}, true, "a failed; 1 pipelines: 0 running"},
		{"failed beside starting", []pipeline.Status{{Name: "a", State: pipeline.StateFailed}, {Name: "b", State: pipeline.StateStarting}}, false, "a failed, b starting; 2 pipelines: 0 running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready, line := summarize(tc.sts)
			if ready != tc.ready || !strings.HasPrefix(line, tc.line) {
				t.Fatalf("summarize = %v, %q; want %v, %q...", ready, line, tc.ready, tc.line)
			}
		})
	}
}

// TestNotifySocket: the states reach NOTIFY_SOCKET, a unix datagram socket
// as systemd listens on.
func TestNotifySocket(t *testing.T) {
	sock := listen(t)
	n := New(func() []pipeline.Status {
		return []pipeline.Status{{Name: "a", State: pipeline.StateRunning, Ready: true}}
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	n.Stopping()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); count(got, "READY=1") != 1 || count(got, "STOPPING=1") != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("on the socket: %q, want READY=1 and STOPPING=1", got)
		}
		time.Sleep(10 * time.Millisecond)
		got = append(got, sock.take()...)
	}
}

// TestWithoutSystemd: no NOTIFY_SOCKET, no notifier, and its methods are
// safe on nil.
func TestWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n := New(func() []pipeline.Status { return nil }, nil)
	if n != nil {
		t.Fatal("a notifier without NOTIFY_SOCKET")
	}
	n.Reloading()
	n.Reloaded(nil)
	n.Stopping()
	n.Run(context.Background())
}
