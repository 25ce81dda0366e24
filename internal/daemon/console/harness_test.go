package console_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins/load"
)

// repoRoot is the repository root (tests run in internal/daemon/console).
func repoRoot(t testing.TB) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..", "..")
}

// freePort returns a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(ln.Close)
	return ln.Addr().(*net.TCPAddr).Port
}

// wat compiles examples/wasm/wat/NAME.wat, after replacing each old with
// new in its text (pairs), into dir/file.
func wat(t testing.TB, name, dir, file string, replace ...string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "wasm", "wat", name+".wat"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(text, replace[i]) {
			t.Fatalf("%s.wat has no %q", name, replace[i])
		}
		text = strings.ReplaceAll(text, replace[i], replace[i+1])
	}
	in := filepath.Join(t.TempDir(), name+".wat")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, file)
	tmp := out + ".tmp"
	testenv.Wat2Wasm(t, in, tmp)
	// A rename, so that a watcher never sees half a file.
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// daemon is a streamd run in this process.
type daemon struct {
	App  *app.App
	Base string // http://127.0.0.1:PORT
	Cfg  *config.Config
	log  *syncBuf
	done chan error
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDaemon runs the config body (admin listen is added) until the test
// ends.
func startDaemon(t *testing.T, body string) *daemon {
	t.Helper()
	return startDaemonAdmin(t, "", body)
}

// startDaemonAdmin is startDaemon with more keys of [admin] (lines of
// TOML; tables such as [admin.auth] go at the end of body instead).
func startDaemonAdmin(t *testing.T, adminKeys, body string) *daemon {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	src := fmt.Sprintf("data_dir = %q\n[admin]\nlisten = \"127.0.0.1:%d\"\n", filepath.Join(dir, "data"), port) + adminKeys + "\n" + body
	file := filepath.Join(dir, "streamd.toml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("config:\n%s\n%v", src, err)
	}
	d := &daemon{Cfg: cfg, Base: "http://127.0.0.1:" + strconv.Itoa(port), log: &syncBuf{}, done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(d.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, log, load.Open, io.Discard) // as streamd run: plugins load in Run
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	d.App = a
	go func() { d.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-d.done:
			if err != nil { // a test may stop a pipeline on purpose (policy stop)
				t.Logf("the daemon's Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("the daemon did not stop within 60 s")
		}
		testenv.Close(t, context.Background(), a)
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	})
	waitFor(t, 60*time.Second, "the admin server", func() (bool, string) {
		res, err := http.Get(d.Base + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		_ = res.Body.Close()
		return res.StatusCode == 200, res.Status
	})
	// The listener opens first; the journal and the fluid bridge once
	// /readyz no longer says "starting".
	waitFor(t, 60*time.Second, "the daemon's parts started", func() (bool, string) {
		res, err := http.Get(d.Base + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		return !strings.Contains(string(body), `"starting"`), string(body)
	})
	// Every pipeline built (its plugins loaded, or failed to).
	waitFor(t, 60*time.Second, "the pipelines' plugins loaded", func() (bool, string) {
		for _, st := range a.Statuses() {
			if st.State == app.StateLoading {
				return false, st.Name + ": " + st.Reason
			}
		}
		return true, ""
	})
	return d
}

// waitFor polls cond every 200 ms until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s: %s", d, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// metric reads one sample of /metrics: name{labels} (labels as written,
// e.g. `pipeline="orders"`).
func metric(t testing.TB, base, name, labels string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(res.Body.Close)
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	want := name + "{" + labels + "}"
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, want+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// produce writes values to topic with keys k0, k1, ...
func produce(t testing.TB, cl *kgo.Client, topic string, values []string) {
	t.Helper()
	produceFrom(t, cl, topic, 0, values)
}

// produceFrom writes values to topic with keys kFIRST, kFIRST+1, ...
func produceFrom(t testing.TB, cl *kgo.Client, topic string, first int, values []string) {
	t.Helper()
	krs := make([]*kgo.Record, len(values))
	for i, v := range values {
		krs[i] = &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(first+i)), Value: []byte(v)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// browser is a headless Chromium tab and what its console said.
type browser struct {
	ctx context.Context
	mu  sync.Mutex
	msg []chromedp.ConsoleMessage
}

// newBrowser starts Debian's chromium headless, with the flags it needs
// on a machine without network access, and a fresh profile; extra are
// more options (flags).
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Missing(t, "chromium (scripts/install-tools browser)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	// Start the browser on ctx itself (the first Do's context is the
	// browser's life), with a timeout of its own: a browser that waits on
	// the network would hang here.
	hung := time.AfterFunc(90*time.Second, cancel)
	err = chromedp.Do(ctx, chromedp.Navigate("about:blank"))
	if !hung.Stop() {
		t.Fatalf("chromium did not start within 90 s: %v", err)
	}
	if err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.msg = append(b.msg, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs actions with a deadline.
func (b *browser) do(t testing.TB, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v\nconsole:\n%s", err, b.console())
	}
}

// eval evaluates a JavaScript expression; a promise is awaited.
func eval[T any](t testing.TB, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until expr is true in the page.
func (b *browser) waitJS(t testing.TB, d time.Duration, what, expr string) {
	t.Helper()
	waitFor(t, d, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			return false, err.Error() + "\nconsole:\n" + b.console()
		}
		if !ok {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 2000)`))
			return false, "not yet; the page says:\n" + text + "\nconsole:\n" + b.console()
		}
		return true, ""
	})
}

// errors returns the console messages of type error or exception.
func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.msg {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
			out = append(out, m.String()+" ("+m.URL+")")
		}
	}
	return out
}

func (b *browser) console() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	for _, m := range b.msg {
		s.WriteString(m.String() + "\n")
	}
	return s.String()
}

// screenshot writes the page to bin/console-NAME.png (CI keeps bin/) and
// the test's output directory.
func (b *browser) screenshot(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	bin := filepath.Join(repoRoot(t), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(bin, "console-"+name+".png"), filepath.Join(t.TempDir(), name+".png")} {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot: bin/console-%s.png (%d bytes)", name, len(png))
}

// produceHeaders writes one record with headers.
func produceHeaders(t testing.TB, cl *kgo.Client, topic, key, value string, headers map[string]string) {
	t.Helper()
	kr := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}
	for k, v := range headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kr).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
