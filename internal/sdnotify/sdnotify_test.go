package sdnotify

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
	t.Cleanup(func() { conn.Close() })
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
// STOPPING=1; STATUS= lines that say what is wrong.
func TestNotifier(t *testing.T) {
	sock := listen(t)
	t.Setenv("WATCHDOG_USEC", "200000") // 200 ms
	var mu sync.Mutex
	sts := []pipeline.Status{{Name: "a", State: pipeline.StateStarting}, {Name: "b", State: pipeline.StateRunning, Ready: true}}
	set := func(f func([]pipeline.Status)) { mu.Lock(); f(sts); mu.Unlock() }
	n := New(func() []pipeline.Status { mu.Lock(); defer mu.Unlock(); return append([]pipeline.Status(nil), sts...) }, nil)
	if n == nil || n.watchdog != 200*time.Millisecond {
		t.Fatalf("notifier %+v", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	time.Sleep(500 * time.Millisecond)
	got := sock.take()
	if count(got, "READY=1") != 0 || count(got, "WATCHDOG=1") < 2 || count(got, "STATUS=a starting") == 0 {
		t.Fatalf("while a is starting: %q", got)
	}
	set(func(s []pipeline.Status) { s[0].State, s[0].Ready = pipeline.StateRunning, true })
	time.Sleep(500 * time.Millisecond)
	got = sock.take()
	if count(got, "READY=1") != 1 || count(got, "STATUS=2 pipelines: 2 running") != 1 {
		t.Fatalf("once ready: %q", got)
	}
	// A stall with a known cause (broker down) keeps the pings.
	set(func(s []pipeline.Status) { s[0].Stalled, s[0].Ready = true, false })
	time.Sleep(500 * time.Millisecond)
	if got = sock.take(); count(got, "WATCHDOG=1") < 2 || count(got, "READY=1") != 0 || count(got, "STATUS=a stalled") != 1 {
		t.Fatalf("stalled, not wedged: %q", got)
	}
	// Wedged: no pings.
	set(func(s []pipeline.Status) { s[0].Wedged = true })
	time.Sleep(100 * time.Millisecond)
	sock.take()
	time.Sleep(600 * time.Millisecond)
	if got = sock.take(); count(got, "WATCHDOG=1") != 0 {
		t.Fatalf("pinged while wedged: %q", got)
	}
	set(func(s []pipeline.Status) { s[0].Wedged, s[0].Stalled, s[0].Ready = false, false, true })
	time.Sleep(500 * time.Millisecond)
	if got = sock.take(); count(got, "WATCHDOG=1") < 2 {
		t.Fatalf("no pings after the wedge ended: %q", got)
	}
	n.Reloading()
	n.Reloaded(errors.New("x.toml:3: pipeline[0].sourc: unknown key\nmore"))
	time.Sleep(300 * time.Millisecond)
	got = sock.take()
	want := []string{"RELOADING=1", "MONOTONIC_USEC=", "READY=1", "STATUS=2 pipelines: 2 running, 0 paused; 0 records out; last reload refused: x.toml:3: pipeline[0].sourc: unknown key ..."}
	for _, w := range want {
		if count(got, w) != 1 {
			t.Fatalf("around a reload: want one %q in %q", w, got)
		}
	}
	n.Stopping()
	time.Sleep(50 * time.Millisecond)
	if got = sock.take(); count(got, "STOPPING=1") != 1 {
		t.Fatalf("stopping: %q", got)
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
