package faults

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/tests/testenv/faultproxy"
	"github.com/streamd/streamd/internal/x/kgox"
)

// need is what a case needs of its broker.
type need int

const (
	// shared: a broker the case may share with others.
	shared need = iota
	// viaProxy: streamd reaches the broker only through a proxy the case
	// cuts and slows; the test's own clients go direct.
	viaProxy
	// wholeBroker: the case stops or freezes the broker process.
	wholeBroker
)

// kenv is one case's Kafka: where streamd connects, where the test's own
// clients connect, and the faults it can apply.
type kenv struct {
	t       *testing.T
	backend string
	seeds   []string  // for streamd
	direct  []string  // for the test's clients: never through the proxy
	opts    []kgo.Opt // for the test's clients
	proxy   *faultproxy.Proxy
	// The broker process, for wholeBroker.
	stopBroker, startBroker, pauseBroker, resumeBroker func()
	adm                                                *kadm.Client
	admCl                                              *kgo.Client // adm's
}

func newEnv(t *testing.T, n need) *kenv {
	t.Helper()
	e := &kenv{t: t, backend: backend()}
	if e.backend == "kafka" {
		e.realKafka(n)
	} else {
		e.kfake(n)
	}
	e.initAdmin()
	return e
}

// initAdmin makes the admin client (once the broker is up).
func (e *kenv) initAdmin() {
	e.admCl = e.client()
	e.adm = kadm.NewClient(e.admCl)
}

func (e *kenv) realKafka(n need) {
	t := e.t
	k := theKafka(t)
	direct := fmt.Sprintf("127.0.0.1:%d", k.port)
	e.seeds, e.direct = []string{direct}, []string{direct}
	switch n {
	case wholeBroker:
		k.wide.Lock()
		t.Cleanup(func() {
			// Leave the broker running for the next case, whatever
			// happened here.
			if out, err := k.script("resume"); err != nil {
				t.Errorf("resuming the broker after the case: %v\n%s", err, out)
			}
			if _, err := k.script("status"); err != nil {
				if out, err := k.script("start", "--keep"); err != nil {
					t.Errorf("restarting the broker after the case: %v\n%s", err, out)
				}
			}
			k.wide.Unlock()
		})
		run := func(args ...string) {
			t.Helper()
			if out, err := k.script(args...); err != nil {
				t.Fatalf("scripts/kafka %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		e.stopBroker = func() { run("stop", "--keep") }
		e.startBroker = func() { run("start", "--keep") }
		e.pauseBroker = func() { run("pause") }
		e.resumeBroker = func() { run("resume") }
	case viaProxy:
		k.wide.RLock()
		p := <-k.proxies
		t.Cleanup(func() {
			if err := p.Set(faultproxy.Pass); err != nil {
				t.Errorf("healing the proxy after the case: %v", err)
			}
			p.Slow(0, 0)
			k.proxies <- p
			k.wide.RUnlock()
		})
		e.proxy = p
		e.seeds = []string{p.Addr()}
	default:
		k.wide.RLock()
		t.Cleanup(k.wide.RUnlock)
	}
}

func (e *kenv) kfake(n need) {
	t := e.t
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4)}
	switch n {
	case wholeBroker:
		// A broker process of its own, persisting to disk: `streamd broker`.
		addr, dir := freeAddr(t), t.TempDir()
		var (
			mu  sync.Mutex
			cmd *exec.Cmd
		)
		log := &lockedBuffer{}
		start := func() {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			c := exec.Command(streamdBin, "broker", "--listen", addr, "--data-dir", dir, "--partitions", "4")
			c.Stdout, c.Stderr = log, log
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cmd = c
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if conn, err := net.Dial("tcp", addr); err == nil {
					_ = conn.Close()
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("streamd broker did not listen on %s:\n%s", addr, log.String())
				}
			}
		}
		e.startBroker = start
		e.stopBroker = func() {
			mu.Lock()
			defer mu.Unlock()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Errorf("streamd broker: %v", err)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("streamd broker exit: %v\n%s", err, log.String())
			}
		}
		e.pauseBroker = func() { signalBroker(t, &mu, cmd, syscall.SIGSTOP) }
		e.resumeBroker = func() { signalBroker(t, &mu, cmd, syscall.SIGCONT) }
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			if cmd.ProcessState == nil {
				_ = cmd.Process.Signal(syscall.SIGCONT) // cleanup of one that may be stopped
				_ = cmd.Process.Kill()
				_ = cmd.Wait() // "killed"
			}
			if t.Failed() {
				t.Logf("streamd broker log tail:\n%s", tail(log.String(), 3000))
			}
		})
		start()
		e.seeds, e.direct = []string{addr}, []string{addr}
		return
	case viaProxy:
		// kfake advertises its listener's Addr: make that the proxy's.
		var realAddr string
		var p *faultproxy.Proxy
		opts = append(opts, kfake.ListenFn(func(network, address string) (net.Listener, error) {
			ln, err := net.Listen(network, address)
			if err != nil {
				return nil, err
			}
			realAddr = ln.Addr().String()
			if p, err = faultproxy.Listen("127.0.0.1:0", realAddr); err != nil {
				_ = ln.Close()
				return nil, err
			}
			return faultproxy.Advertise(ln, p.Addr()), nil
		}))
		c, err := kfake.NewCluster(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			testenv.Check(t, p.Close)
			c.Close()
		})
		e.proxy = p
		e.seeds, e.direct = []string{p.Addr()}, []string{realAddr}
		// The test's clients learn the proxy's address from metadata too:
		// they dial the broker itself instead.
		e.opts = []kgo.Opt{kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host == p.Addr() {
				host = realAddr
			}
			var d net.Dialer
			return d.DialContext(ctx, network, host)
		})}
		return
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.seeds, e.direct = c.ListenAddrs(), c.ListenAddrs()
}

// client returns a franz-go client of the test's, closed with the test.
func (e *kenv) client(opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(e.direct...)}, e.opts...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	return cl
}

// createTopic creates topic with 4 partitions and configs (name=value).
// Its retention is unlimited unless configs say otherwise: the broker's
// time-based retention (7 days) counts from the records' timestamps and
// would delete a backlog from 2020 (and its copy in the output) while a
// case reads it.
func (e *kenv) createTopic(topic string, configs ...string) {
	e.t.Helper()
	unlimited := "-1"
	cfg := map[string]*string{"retention.ms": &unlimited}
	for _, c := range configs {
		k, v, _ := strings.Cut(c, "=")
		cfg[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := e.adm.CreateTopic(ctx, 4, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		e.t.Fatalf("create topic %s: %v", topic, err)
	}
	e.waitHosted(topic)
}

// waitHosted waits until the broker hosts every partition of topic (it
// answers their end offsets). Apache Kafka answers CreateTopics before its
// broker has created the partitions' logs: on 2 cores at load ~24, with the
// suite's cases creating ~500 partitions at once, a topic was not hosted
// until 46 s after its creation, its producers refused with
// UNKNOWN_TOPIC_OR_PARTITION meanwhile. A case starts from pipelines that
// flow; a broker that is slow to create topics is not its fault.
func (e *kenv) waitHosted(topic string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		// Asked of the broker first: kadm answers ListEndOffsets from
		// metadata it caches for 5 s, which may say the topic is unknown
		// (kgox.TopicPartitions' request refreshes it).
		_, err := kgox.TopicPartitions(ctx, e.admCl, topic, 0)
		var ends kadm.ListedOffsets
		if err == nil {
			ends, err = e.adm.ListEndOffsets(ctx, topic)
		}
		if err == nil {
			err = ends.Error()
		}
		if err == nil && len(ends[topic]) == 4 {
			return
		}
		if ctx.Err() != nil {
			e.t.Fatalf("topic %s: its partitions not hosted by the broker 3m after its creation: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(l.Close)
	return l.Addr().String()
}

// lockedBuffer is a bytes.Buffer safe for a process's output and a
// test's reads at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// logDir is where daemons' logs are kept for a post-mortem:
// $STREAMD_TEST_LOG_DIR/faults-<backend> (scripts/test: bin/logs, which
// its secret scan reads), or bin/faults-logs/<backend>.
func logDir() string {
	d := filepath.Join(root, "bin", "faults-logs", backend())
	if dir := os.Getenv("STREAMD_TEST_LOG_DIR"); dir != "" {
		d = filepath.Join(dir, "faults-"+backend())
	}
	_ = os.MkdirAll(d, 0o755) // a log kept for a post-mortem; its writer gives up without it
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// signalBroker sends sig to the broker process under mu; a broker that is
// gone fails the test (the fault was not injected).
func signalBroker(t testing.TB, mu *sync.Mutex, cmd *exec.Cmd, sig os.Signal) {
	mu.Lock()
	defer mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Errorf("streamd broker: signal %v: %v", sig, err)
	}
}
