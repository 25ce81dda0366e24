package secured_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins/load"
)

var (
	pluginOnce sync.Once
	pluginPath string
	pluginErr  error
	pluginDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pluginDir != "" {
		_ = os.RemoveAll(pluginDir) // a temp dir; no test is left to fail
	}
	os.Exit(code)
}

func repoRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// downgradePlugin builds the Go orders-downgrade Wasm plugin (v2 orders
// to v1) once.
func downgradePlugin(t testing.TB) string {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp("", "streamd-secured-")
		if pluginErr != nil {
			return
		}
		pluginPath = filepath.Join(pluginDir, "orders-downgrade.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", pluginPath, ".")
		cmd.Dir = filepath.Join(repoRoot(t), "examples/wasm/go/orders-downgrade")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginErr = fmt.Errorf("build the downgrade plugin: %v\n%s", err, out)
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginPath
}

// daemon is streamd running in this process from a config, its whole log
// in a file kept for the secret scan.
type daemon struct {
	a       *app.App
	admin   string
	logPath string
	cancel  context.CancelFunc
	done    chan error
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(l.Close)
	return l.Addr().String()
}

// startDaemon runs the config body (with [admin] listen added) until the
// test ends.
func startDaemon(t *testing.T, name, body string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{admin: freeAddr(t), done: make(chan error, 1)}
	src := fmt.Sprintf("data_dir = %q\n[admin]\nlisten = %q\n[log]\nlevel = \"info\"\n", filepath.Join(dir, "data"), d.admin) + body
	cfg, err := config.Parse(filepath.Join(dir, "streamd.toml"), []byte(src), os.LookupEnv)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, src)
	}
	f := testenv.LogFile(t, name)
	d.logPath = f.Name()
	testenv.TailOnFailure(t, d.logPath)
	log := slog.New(slog.NewTextHandler(&syncWriter{w: f}, nil))
	a, err := app.Build(context.Background(), cfg, log, load.Open, io.Discard)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	d.a = a
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { d.done <- a.Run(ctx) }()
	t.Cleanup(func() { d.stop(t) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + d.admin + "/healthz"); err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the admin server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return d
}

func (d *daemon) stop(t testing.TB) {
	if d.cancel == nil {
		return
	}
	d.cancel()
	d.cancel = nil
	if err := <-d.done; err != nil { // a test may leave a pipeline failed on purpose (ACLs refused)
		t.Logf("the daemon's Run: %v", err)
	}
	if err := d.a.Close(context.Background()); err != nil {
		t.Logf("closing the daemon: %v", err)
	}
}

// log returns the daemon's log so far.
func (d *daemon) log(t testing.TB) string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readyz returns /readyz's status and body.
func (d *daemon) readyz(t testing.TB) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + d.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(resp.Body.Close)
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// pipelines returns /pipelines.
func (d *daemon) pipelines(t testing.TB) []map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + d.admin + "/pipelines")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(resp.Body.Close)
	var out []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (d *daemon) waitReady(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := d.readyz(t)
		if code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within %s: %d %s", within, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// kcatConfig writes a librdkafka properties file (kcat -F) for a listener
// and returns its path: the credentials go in a file, never on a command
// line or in a log.
func kcatConfig(t testing.TB, props map[string]string) string {
	t.Helper()
	var b strings.Builder
	for k, v := range props {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	p := filepath.Join(t.TempDir(), "kcat.properties")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// kcatProduce writes n v2 orders (keys o-0 ... o-(n-1)) into topic.
func kcatProduce(t testing.TB, kcat, props, brokers, topic string, from, n int) {
	t.Helper()
	var in bytes.Buffer
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&in, "o-%d\t%s\n", i, orderV2(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-F", props, "-b", brokers, "-P", "-t", topic, "-K", "\t")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P -t %s: %v\n%s", topic, err, out)
	}
}

func orderV2(i int) string {
	return fmt.Sprintf(`{"order_id":"o-%d","customer":{"id":"c-%d","name":"name %d"},"amount_cents":%d,"currency":"EUR"}`, i, i%97, i, 100+i)
}

// kcatConsume reads n records of topic with kcat and checks each is the
// v1 downgrade of its v2 order, once.
func kcatConsume(t testing.TB, kcat, props, brokers, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-F", props, "-b", brokers, "-C", "-t", topic, "-o", "beginning", "-c", fmt.Sprint(n), "-J", "-q")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -C -t %s: %v (%d bytes read)\n%s", topic, err, len(out), stderr.Bytes())
	}
	checkV1(t, topic, out, from, n)
}

// checkV1 checks JSON lines of {"key":..,"payload":..} are the v1
// orders from..from+n-1, each once.
func checkV1(t testing.TB, topic string, lines []byte, from, n int) {
	t.Helper()
	seen := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		var r struct {
			Key     string `json:"key"`
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: line %q: %v", topic, line, err)
		}
		var i int
		if _, err := fmt.Sscanf(r.Key, "o-%d", &i); err != nil || i < from || i >= from+n {
			t.Fatalf("%s: unexpected key %q", topic, r.Key)
		}
		var got, want map[string]any
		if err := json.Unmarshal([]byte(r.Payload), &got); err != nil {
			t.Fatalf("%s: %s = %s: %v", topic, r.Key, r.Payload, err)
		}
		if err := json.Unmarshal([]byte(fmt.Sprintf(`{"order_id":"o-%d","customer_id":"c-%d","amount_cents":%d,"currency":"EUR"}`, i, i%97, 100+i)), &want); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %s = %s, want the v1 order %v", topic, r.Key, r.Payload, want)
		}
		if seen[r.Key] {
			t.Fatalf("%s: %s twice", topic, r.Key)
		}
		seen[r.Key] = true
	}
	if len(seen) != n {
		t.Fatalf("%s: %d distinct records, want %d", topic, len(seen), n)
	}
}

// unsignedJWT is a token Kafka's unsecured JWS validator accepts:
// {"alg":"none"}, sub, iat, exp.
func unsignedJWT(sub string, ttl time.Duration) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now()
	return enc(map[string]string{"alg": "none"}) + "." + enc(map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(ttl).Unix()}) + "."
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
