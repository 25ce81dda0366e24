package faultproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// echoServer echoes every line it reads; it is closed when the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer testenv.Ignore(c.Close)
				_, _ = io.Copy(c, c) // an echo until the peer hangs up
			}()
		}
	}()
	return ln.Addr().String()
}

func proxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := Listen("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Cleanup(t, p.Close)
	return p
}

// roundTrip writes msg on c and reads it back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestPass(t *testing.T) {
	p := proxy(t)
	c := dial(t, p)
	for _, msg := range []string{"a", strings.Repeat("x", 200<<10)} {
		got, err := roundTrip(c, msg, 5*time.Second)
		if err != nil || got != msg {
			t.Fatalf("round trip of %d bytes: %v (got %d bytes)", len(msg), err, len(got))
		}
	}
	waitStats(t, p, func(s Stats) bool {
		return s.Accepted == 1 && s.Open == 1 && s.BytesUp == 200<<10+3 && s.BytesDown == s.BytesUp
	})
}

// waitStats waits until p's stats satisfy ok. A byte is counted once
// written to its destination: the echo of the last bytes can reach the
// client before the proxy counts them.
func waitStats(t *testing.T, p *Proxy, ok func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := p.Stats()
		if ok(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRefuseAndHeal(t *testing.T) {
	p := proxy(t)
	c := dial(t, p)
	if _, err := roundTrip(c, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Set(Refuse); err != nil {
		t.Fatal(err)
	}
	// The open connection was reset,
	if _, err := roundTrip(c, "during", 5*time.Second); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("open connection after Refuse: %v, want a reset", err)
	}
	// and a new one is refused.
	if _, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial during Refuse: %v, want ECONNREFUSED", err)
	}
	if s := p.Stats(); s.Reset != 1 || s.Open != 0 {
		t.Fatalf("stats %+v", s)
	}
	if err := p.Set(Pass); err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, p)
	if got, err := roundTrip(c2, "after", 5*time.Second); err != nil || got != "after" {
		t.Fatalf("after heal: %q %v", got, err)
	}
}

func TestBlackholeHoldsBytes(t *testing.T) {
	p := proxy(t)
	c := dial(t, p)
	if _, err := roundTrip(c, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Set(Blackhole); err != nil {
		t.Fatal(err)
	}
	// Nothing comes back on the open connection,
	if _, err := roundTrip(c, "held", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("open connection in Blackhole: %v, want a timeout", err)
	}
	// a new connection is accepted but not answered,
	c2 := dial(t, p)
	if _, err := roundTrip(c2, "new", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection in Blackhole: %v, want a timeout", err)
	}
	if err := p.Set(Pass); err != nil {
		t.Fatal(err)
	}
	// and after the heal the held bytes arrive on both.
	for _, tc := range []struct {
		c    net.Conn
		want string
	}{{c, "held"}, {c2, "new"}} {
		if err := tc.c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(tc.c).ReadString('\n')
		if err != nil || line != tc.want+"\n" {
			t.Fatalf("after heal: %q %v, want %q", line, err, tc.want)
		}
	}
}

func TestResetConns(t *testing.T) {
	p := proxy(t)
	c := dial(t, p)
	if _, err := roundTrip(c, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := p.ResetConns(); n != 1 {
		t.Fatalf("ResetConns = %d, want 1", n)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read after reset: %v, want a connection error", err)
	}
	c2 := dial(t, p)
	if _, err := roundTrip(c2, "y", 5*time.Second); err != nil {
		t.Fatalf("new connection after ResetConns: %v", err)
	}
}

// TestSlow checks lower bounds only: a loaded machine may be slower, never
// faster.
func TestSlow(t *testing.T) {
	p := proxy(t)
	c := dial(t, p)
	p.Slow(100*time.Millisecond, 0)
	t0 := time.Now()
	if _, err := roundTrip(c, "x", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Fatalf("round trip took %v with 100ms latency each way", d)
	}
	p.Slow(0, 100<<10) // 100 KiB/s each way
	msg := strings.Repeat("y", 50<<10)
	t0 = time.Now()
	if got, err := roundTrip(c, msg, 10*time.Second); err != nil || got != msg {
		t.Fatalf("%v", err)
	}
	// 50 KiB up at 100 KiB/s: the first chunk goes at once, the rest waits.
	if d := time.Since(t0); d < 400*time.Millisecond {
		t.Fatalf("50 KiB took %v at 100 KiB/s", d)
	}
	p.Slow(0, 0)
	if _, err := roundTrip(c, msg, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitStats(t, p, func(s Stats) bool { return s.BytesUp == s.BytesDown })
}

func TestAdvertise(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(ln.Close)
	a := Advertise(ln, "127.0.0.1:1234")
	if a.Addr().String() != "127.0.0.1:1234" || a.Addr().Network() != "tcp" {
		t.Fatalf("Addr = %v", a.Addr())
	}
	go func() {
		c, err := a.Accept()
		if err == nil {
			_, _ = c.Write([]byte("ok")) // the test reads it; a failed write fails there
			_ = c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	if !bytes.Equal(b, []byte("ok")) {
		t.Fatalf("read %q", b)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestListenOutsideEphemeralRange: a proxy asked for port 0 listens
// outside the kernel's range for outgoing connections, so that no
// connection made while Refuse has its socket closed can take its port
// (a trial CI run's net-refused case failed with "listen again: address
// already in use" on a port in that range).
func TestListenOutsideEphemeralRange(t *testing.T) {
	lo, hi := EphemeralRange()
	for range 20 {
		p, err := Listen("127.0.0.1:0", "127.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(p.Addr())
		n, _ := strconv.Atoi(port)
		testenv.Close(t, context.Background(), p)
		if n >= lo && n <= hi {
			t.Fatalf("port %d is in the ephemeral range %d-%d", n, lo, hi)
		}
	}
}
