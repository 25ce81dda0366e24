package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"golang.org/x/sys/unix"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// notifySocket is a NOTIFY_SOCKET the test listens on, as systemd does:
// every datagram with its arrival time.
type notifySocket struct {
	path string
	mu   sync.Mutex
	msgs []notifyMsg
}

type notifyMsg struct {
	at    time.Time
	lines []string
	ready bool // /readyz answered 200 just after it arrived
}

func listenNotify(t *testing.T, readyz string) *notifySocket {
	t.Helper()
	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Cleanup(t, func() error { return os.RemoveAll(dir) })
	n := &notifySocket{path: filepath.Join(dir, "notify")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		buf := make([]byte, 8192)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			m := notifyMsg{at: time.Now(), lines: strings.Split(string(buf[:k]), "\n")}
			if m.has("READY=1") {
				resp, err := http.Get("http://" + readyz + "/readyz")
				m.ready = err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					_ = resp.Body.Close()
				}
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, m)
			n.mu.Unlock()
		}
	}()
	return n
}

func (m notifyMsg) has(prefix string) bool {
	for _, l := range m.lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func (m notifyMsg) value(prefix string) string {
	for _, l := range m.lines {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return v
		}
	}
	return ""
}

// since returns the messages received from t0 on.
func (n *notifySocket) since(t0 time.Time) []notifyMsg {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []notifyMsg
	for _, m := range n.msgs {
		if !m.at.Before(t0) {
			out = append(out, m)
		}
	}
	return out
}

func count(ms []notifyMsg, prefix string) int {
	c := 0
	for _, m := range ms {
		if m.has(prefix) {
			c++
		}
	}
	return c
}

// wait waits for a message with prefix from t0 on.
func (n *notifySocket) wait(t *testing.T, t0 time.Time, prefix string, d time.Duration) notifyMsg {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, m := range n.since(t0) {
			if m.has(prefix) {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s from streamd within %s; got %v", prefix, d, n.since(t0))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startEnv(t *testing.T, cfg string, env ...string) *daemon {
	t.Helper()
	d := &daemon{log: &lockedBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(streamdBin, "run", "-c", cfg)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.kill(t)
		}
		if t.Failed() {
			t.Logf("streamd log:\n%s", tail(d.log.String(), 6000))
		}
	})
	return d
}

// TestSystemdNotify: against a NOTIFY_SOCKET the
// test listens on: READY=1 arrives only once /readyz answers 200 (one
// pipeline's broker only comes up 3 s after the start); RELOADING=1 with
// MONOTONIC_USEC, then READY=1, around a SIGHUP; watchdog pings every half
// WATCHDOG_USEC while the engine progresses, none while a pipeline is
// wedged (a native sink plugin that blocks in every call, cut by its
// timeout), and again once it is removed; STOPPING=1 on SIGTERM.
func TestSystemdNotify(t *testing.T) {
	b := testenv.Kafka(t)
	in, out := testenv.Topic(t, "in"), testenv.Topic(t, "out")
	b.CreateTopic(t, in, 2)
	b.CreateTopic(t, out, 2)
	plugin := filepath.Join(t.TempDir(), "testplugin")
	if o, err := exec.Command("go", "build", "-o", plugin, "github.com/streamd/streamd/plugins/native/internal/testplugin").CombinedOutput(); err != nil {
		t.Fatalf("build test plugin: %v\n%s", err, o)
	}
	lateAddr := freePort(t) // the broker of pipeline "late", started 3 s after streamd
	admin := freePort(t)
	head := fmt.Sprintf("data_dir = %q\n", t.TempDir()) + brokersTOML(b) + fmt.Sprintf(`[kafka.clusters.late]
brokers = [%q]
[admin]
listen = %q
[[pipeline]]
name = "flow"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[pipeline.sink]
type = "kafka"
topic = %q
[[pipeline]]
name = "late"
[pipeline.source]
type = "generate"
rate = 50
[pipeline.sink]
type = "kafka"
cluster = "late"
topic = "late"
`, lateAddr, admin, in, testenv.Topic(t, "g"), out)
	wedged := fmt.Sprintf(`[[pipeline]]
name = "wedged"
stall_timeout = "2s"
shutdown_timeout = "1s"
[pipeline.source]
type = "generate"
rate = 100
[pipeline.sink]
type = "native"
plugin = "native:%s"
timeout = "1s"
[pipeline.sink.config]
sleep_ms = 3600000
sink_file = %q
`, plugin, filepath.Join(t.TempDir(), "sink.txt"))
	cfg := writeConfig(t, head)
	sock := listenNotify(t, admin)
	t0 := time.Now()
	d := startEnv(t, cfg, "NOTIFY_SOCKET="+sock.path, "WATCHDOG_USEC=1000000", "STREAMD_TESTPLUGIN_KIND=sink")
	f := startFlow(t, b, 100, 10, in)
	defer f.halt()

	// READY=1 only once every pipeline is ready: not while "late" waits
	// for its broker.
	time.Sleep(3 * time.Second)
	if n := count(sock.since(t0), "READY=1"); n != 0 {
		t.Fatalf("READY=1 sent while pipeline late had no broker: %v", sock.since(t0))
	}
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before late's broker: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	port, _ := strconv.Atoi(lateAddr[strings.LastIndex(lateAddr, ":")+1:])
	late, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	up := time.Now()
	ready := sock.wait(t, t0, "READY=1", time.Minute)
	t.Logf("READY=1 %s after the late broker came up (%s after start); /readyz then: ready=%v; STATUS=%s",
		ready.at.Sub(up).Round(time.Millisecond), ready.at.Sub(t0).Round(time.Millisecond), ready.ready, ready.value("STATUS="))
	if !ready.ready {
		t.Fatal("READY=1 arrived while /readyz did not answer 200")
	}
	if n := count(sock.since(t0), "READY=1"); n != 1 {
		t.Fatalf("READY=1 sent %d times at start", n)
	}
	time.Sleep(1600 * time.Millisecond)
	if c := count(sock.since(ready.at), "WATCHDOG=1"); c < 2 {
		t.Fatalf("%d watchdog pings in the 1.6 s after READY=1 (WATCHDOG_USEC 1 s: one every 0.5 s)", c)
	}

	// A reload: RELOADING=1 with MONOTONIC_USEC, then READY=1. It adds the
	// wedged pipeline.
	if err := os.WriteFile(cfg, []byte(head+wedged), 0o644); err != nil {
		t.Fatal(err)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	hup := time.Now()
	d.signal(t, syscall.SIGHUP)
	rl := sock.wait(t, hup, "RELOADING=1", 30*time.Second)
	rd := sock.wait(t, rl.at, "READY=1", 30*time.Second)
	usec, err := strconv.ParseInt(rl.value("MONOTONIC_USEC="), 10, 64)
	if err != nil || usec < ts.Nano()/1000 || usec > ts.Nano()/1000+30e6 {
		t.Fatalf("RELOADING=1 with MONOTONIC_USEC=%q, the test's monotonic clock was %d us at SIGHUP", rl.value("MONOTONIC_USEC="), ts.Nano()/1000)
	}
	t.Logf("SIGHUP: RELOADING=1 after %s (MONOTONIC_USEC %d), READY=1 %s later", rl.at.Sub(hup).Round(time.Millisecond), usec, rd.at.Sub(rl.at).Round(time.Millisecond))

	// Wedged: no pings.
	addr := d.adminAddr(t)
	st := waitPipeline(t, addr, "wedged", "wedged", time.Minute, func(p *adminPipeline) bool { return p.Wedged })
	wedgedAt := time.Now()
	time.Sleep(3 * time.Second)
	pings := count(sock.since(wedgedAt), "WATCHDOG=1")
	status := sock.since(rd.at)
	t.Logf("wedged (%s): %d watchdog pings in the 3 s after; last STATUS=%s", st.Reason, pings, lastStatus(status))
	if pings != 0 {
		t.Fatalf("%d watchdog pings while pipeline wedged was wedged", pings)
	}
	if !strings.Contains(d.logText(), "not pinging while a pipeline is wedged") || !strings.Contains(lastStatus(status), "wedged wedged") {
		t.Fatalf("the wedge is not logged or not in STATUS=: %q", lastStatus(status))
	}
	// Removed: the pings come back.
	if err := os.WriteFile(cfg, []byte(head), 0o644); err != nil {
		t.Fatal(err)
	}
	d.signal(t, syscall.SIGHUP)
	again := sock.wait(t, time.Now(), "WATCHDOG=1", time.Minute)
	t.Logf("pipeline wedged removed: pings again %s after the SIGHUP", again.at.Sub(wedgedAt.Add(3*time.Second)).Round(time.Millisecond))

	// SIGTERM: STOPPING=1.
	term := time.Now()
	d.signal(t, syscall.SIGTERM)
	stop := sock.wait(t, term, "STOPPING=1", 10*time.Second)
	if err := <-d.done; err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	t.Logf("SIGTERM: STOPPING=1 after %s, exit after %s", stop.at.Sub(term).Round(time.Millisecond), time.Since(term).Round(time.Millisecond))
}

func lastStatus(ms []notifyMsg) string {
	s := ""
	for _, m := range ms {
		if v := m.value("STATUS="); v != "" {
			s = v
		}
	}
	return s
}

// TestUnitFileVerifies: packaging/systemd/streamd.service passes
// `systemd-analyze verify` with nothing to say (it exits 0 even for an
// unknown key, so any output fails the test). The unit file is verified as
// shipped, in a root that has what an installed system has: streamd at its
// ExecStart path, kill, and the host's own units (the targets it names).
func TestUnitFileVerifies(t *testing.T) {
	sa := testenv.Tool(t, "systemd-analyze")
	unit := filepath.Join(repoRoot(t), "packaging", "systemd", "streamd.service")
	body := mustRead(t, unit)
	root := t.TempDir()
	for _, d := range []string{"usr/local/bin", "usr/bin", "usr/lib/systemd", "etc/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, to), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(streamdBin, "usr/bin/streamd")
	kill, err := exec.LookPath("kill")
	if err != nil {
		t.Fatal(err)
	}
	copyFile(kill, "usr/bin/kill")
	units := "/usr/lib/systemd/system"
	if _, err := os.Stat(units); err != nil {
		units = "/lib/systemd/system"
	}
	if o, err := exec.Command("cp", "-r", units, filepath.Join(root, "usr/lib/systemd/")).CombinedOutput(); err != nil {
		t.Fatalf("copy the host's units: %v %s", err, o)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/systemd/system/streamd.service"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := exec.Command(sa, "verify", "--root="+root, "/etc/systemd/system/streamd.service").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(o))) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, o)
	}
	sec, _ := exec.Command(sa, "security", "--offline=yes", "--root="+root, "/etc/systemd/system/streamd.service").CombinedOutput()
	if i := strings.Index(string(sec), "Overall exposure level"); i >= 0 {
		t.Logf("systemd-analyze security: %s", strings.TrimSpace(string(sec[i:])))
	}
	// The check can fail: a misspelt key is reported.
	bad := strings.Replace(string(body), "ProtectSystem=strict", "ProtectSytem=strict", 1)
	if err := os.WriteFile(filepath.Join(root, "etc/systemd/system/streamd.service"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, _ := exec.Command(sa, "verify", "--root="+root, "/etc/systemd/system/streamd.service").CombinedOutput(); !strings.Contains(string(o), "ProtectSytem") {
		t.Fatalf("systemd-analyze verify did not report a misspelt key: %s", o)
	}
}
