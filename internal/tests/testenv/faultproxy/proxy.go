package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/streamd/streamd/internal/x/wait"
)

// Mode is what the proxy does with connections.
type Mode int

// The modes of a Proxy.
const (
	// Pass forwards every connection (subject to Slow).
	Pass Mode = iota
	// Refuse closes the listening socket, so a connect is refused
	// (ECONNREFUSED), and resets every open connection: the target is
	// down, its host still up.
	Refuse
	// Blackhole keeps every connection open and forwards nothing, either
	// way, until the mode changes; new connections are accepted and get no
	// answer either. Bytes are held, not lost: when the partition heals
	// they are delivered, as TCP retransmits them, unless an end has given
	// up and closed its socket meanwhile.
	Blackhole
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Refuse:
		return "refuse"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Proxy forwards TCP connections from its address to a target.
type Proxy struct {
	addr, target string

	mu      sync.Mutex
	ln      net.Listener
	mode    Mode
	healed  chan struct{} // closed when the mode leaves Blackhole
	conns   map[*link]struct{}
	closed  bool
	latency time.Duration
	up      bucket // client -> target
	down    bucket // target -> client
	stats   Stats
	wg      sync.WaitGroup
}

// Stats counts what a Proxy did.
type Stats struct {
	// Accepted counts the connections accepted.
	Accepted int
	// Open is the number of connections open now.
	Open int
	// Reset counts the connections reset by Refuse or ResetConns.
	Reset int
	// BytesUp and BytesDown count the bytes forwarded to the target and
	// back.
	BytesUp, BytesDown int64
}

// Listen returns a proxy listening on addr (host:port; port 0 picks one
// outside the kernel's ephemeral port range) that forwards each
// connection to target, in mode Pass.
//
// A port the kernel hands out for outgoing connections could be taken by
// one while Refuse has the proxy's socket closed, and the proxy could not
// listen on it again; a port outside that range cannot.
func Listen(addr, target string) (*Proxy, error) {
	p := &Proxy{target: target, conns: map[*link]struct{}{}, healed: make(chan struct{})}
	close(p.healed)
	ln, err := listen(addr)
	if err != nil {
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// listen listens on addr; for port 0, on a free port outside the
// kernel's ephemeral range when one is found in a few tries.
func listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" {
		return net.Listen("tcp", addr)
	}
	lo, hi := EphemeralRange()
	for range 64 {
		// Above the range when there is room, else below it (from 10000).
		var n int
		if hi < 65535-1000 {
			n = hi + 1 + rand.IntN(65535-hi)
		} else {
			n = 10000 + rand.IntN(max(lo-10000, 1))
		}
		if n >= lo && n <= hi {
			continue
		}
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(n))); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", addr)
}

// EphemeralRange returns the kernel's range of ports for outgoing
// connections (Linux's ip_local_port_range; its default elsewhere).
func EphemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}

// Addr returns the address the proxy listens on (it keeps it across
// Refuse).
func (p *Proxy) Addr() string { return p.addr }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Open = len(p.conns)
	return s
}

// Set switches the proxy to mode m. Leaving Refuse listens on the same
// address again; leaving Blackhole lets held bytes through.
func (p *Proxy) Set(m Mode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return net.ErrClosed
	}
	if m == p.mode {
		return nil
	}
	old := p.mode
	switch old {
	case Refuse:
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err)
		}
		p.ln = ln
		p.wg.Add(1)
		go p.accept(ln)
	case Blackhole:
		close(p.healed)
	}
	p.mode = m
	switch m {
	case Refuse:
		_ = p.ln.Close()
		p.ln = nil
		p.resetLocked()
	case Blackhole:
		p.healed = make(chan struct{})
	}
	return nil
}

// ResetConns resets every open connection (the peer sees ECONNRESET) and
// returns how many it reset; new connections are still accepted.
func (p *Proxy) ResetConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resetLocked()
}

func (p *Proxy) resetLocked() int {
	n := 0
	for l := range p.conns {
		l.reset()
		delete(p.conns, l)
		n++
	}
	p.stats.Reset += n
	return n
}

// Slow delays every chunk of bytes by latency in each direction and caps
// the throughput of each direction, over all connections together, at
// bytesPerSecond (0: no cap). Slow(0, 0) restores full speed.
func (p *Proxy) Slow(latency time.Duration, bytesPerSecond int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = latency
	p.up.setRate(bytesPerSecond)
	p.down.setRate(bytesPerSecond)
}

// Close stops the proxy and closes every connection, and waits until its
// goroutines have returned, or ctx is done.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.ln != nil {
		_ = p.ln.Close()
	}
	for l := range p.conns {
		l.reset()
		delete(p.conns, l)
	}
	if p.mode == Blackhole {
		close(p.healed)
	}
	p.mu.Unlock()
	if err := wait.Group(ctx, &p.wg); err != nil {
		return fmt.Errorf("faultproxy %s: connections still open at the deadline: %w", p.addr, err)
	}
	return nil
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		p.mu.Lock()
		if p.closed || p.ln != ln {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		l := &link{client: c.(*net.TCPConn)}
		p.conns[l] = struct{}{}
		p.stats.Accepted++
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(l)
	}
}

// link is one proxied connection.
type link struct {
	client, server *net.TCPConn
	once           sync.Once
	mu             sync.Mutex
	dead           bool
}

// reset closes both ends with RST (SO_LINGER 0).
func (l *link) reset() { l.end(true) }

// close closes both ends normally.
func (l *link) close() { l.end(false) }

// end closes both ends, once, with RST when rst.
func (l *link) end(rst bool) {
	l.once.Do(func() {
		l.mu.Lock()
		l.dead = true
		s := l.server
		l.mu.Unlock()
		for _, c := range []*net.TCPConn{l.client, s} {
			if c == nil {
				continue
			}
			if rst {
				_ = c.SetLinger(0)
			}
			_ = c.Close()
		}
	})
}

func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	// In a partition a new connection gets no answer: wait for the heal
	// before even dialing the target.
	if !p.gate() {
		return
	}
	sc, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		// The target is down: the client sees its connection closed,
		// as it would through a real load balancer or NAT.
		return
	}
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		_ = sc.Close()
		return
	}
	l.server = sc.(*net.TCPConn)
	l.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l.server, l.client, &p.up, &p.stats.BytesUp) }()
	go func() { defer wg.Done(); p.pipe(l.client, l.server, &p.down, &p.stats.BytesDown) }()
	wg.Wait()
}

// gate waits while the proxy is in Blackhole; false means the proxy closed.
func (p *Proxy) gate() bool {
	p.mu.Lock()
	h, closed := p.healed, p.closed
	p.mu.Unlock()
	if closed {
		return false
	}
	<-h
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

type chunk struct {
	due time.Time
	b   []byte
}

// pipe copies src to dst through a queue: the reader stamps each chunk
// with the time it may be written (now + latency), the writer waits for
// that time, for the bandwidth cap and for any partition to heal. A half
// close is passed on; an error closes both ends.
func (p *Proxy) pipe(dst, src *net.TCPConn, bw *bucket, count *int64) {
	q := make(chan chunk, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if !p.gate() {
				break
			}
			bw.wait(len(c.b))
			if _, err := dst.Write(c.b); err != nil {
				_ = src.Close()
				_ = dst.Close()
				break
			}
			p.mu.Lock()
			*count += int64(len(c.b))
			p.mu.Unlock()
		}
		for range q { // the reader stops when its socket is closed
		}
	}()
	for p.gate() {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			lat := p.latency
			p.mu.Unlock()
			q <- chunk{due: time.Now().Add(lat), b: buf[:n]}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
	if err := dst.CloseWrite(); err != nil {
		_ = dst.Close()
	}
}

// bucket paces writes at a rate shared by every connection of one
// direction, like one link.
type bucket struct {
	mu   sync.Mutex
	rate int       // bytes per second; 0: unlimited
	next time.Time // when the link is free again
}

func (b *bucket) setRate(r int) {
	b.mu.Lock()
	b.rate = r
	b.next = time.Time{}
	b.mu.Unlock()
}

func (b *bucket) wait(n int) {
	b.mu.Lock()
	if b.rate <= 0 {
		b.mu.Unlock()
		return
	}
	now := time.Now()
	start := b.next
	if start.Before(now) {
		start = now
	}
	b.next = start.Add(time.Duration(float64(n) / float64(b.rate) * float64(time.Second)))
	wait := time.Until(b.next)
	b.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
}

// Advertise returns ln with its Addr reporting addr instead: for a server
// that advertises its listener's address, such as kfake (kfake.ListenFn),
// to send its clients to a proxy at addr in front of it.
func Advertise(ln net.Listener, addr string) net.Listener {
	return advertised{ln, addr}
}

type advertised struct {
	net.Listener
	addr string
}

func (a advertised) Addr() net.Addr { return tcpAddr(a.addr) }

type tcpAddr string

func (a tcpAddr) Network() string { return "tcp" }
func (a tcpAddr) String() string  { return string(a) }
