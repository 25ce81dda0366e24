package native

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	pluginv1 "github.com/streamd/streamd/proto/streamd/plugin/v1"
	"github.com/streamd/streamd/record"
)

var fastSup = supervision{
	backoffMin:   10 * time.Millisecond,
	backoffMax:   100 * time.Millisecond,
	maxCrashes:   3,
	window:       time.Minute,
	startTimeout: 20 * time.Second,
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// logLines returns the JSON log lines written to buf.
func logLines(t *testing.T, buf *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func openTest(t *testing.T, kind string, cfg map[string]any, mod func(*plugins.Options)) (plugins.Plugin, *supervisor) {
	t.Helper()
	t.Setenv("STREAMD_TESTPLUGIN_KIND", kind)
	opts := plugins.Options{Config: cfg}
	if mod != nil {
		mod(&opts)
	}
	p, err := open(context.Background(), testPlugin(t), opts, fastSup)
	if err != nil {
		t.Fatal(err)
	}
	testenv.CloseAtEnd(t, p)
	return p, p.(interface{ sup() *supervisor }).sup()
}

func rec(value string) record.Record {
	return record.Record{Value: []byte(value), Topic: "t", Partition: 2, Offset: 7, Timestamp: time.UnixMilli(1700000000123).UTC()}
}

func TestTransform(t *testing.T) {
	p, _ := openTest(t, "transform", nil, nil)
	if m := p.Manifest(); m != (plugins.Manifest{Name: "testplugin", Kind: plugins.KindTransform, Version: "0.0.1", ABI: 1}) {
		t.Fatalf("manifest %+v", m)
	}
	tr := p.(plugins.Transformer)
	in := []record.Record{rec("abc"), rec("poison"), rec("drop"), rec("keep"), rec("dup"), {Key: []byte{}, Value: nil}}
	in[0].Key = []byte("k")
	in[0].Headers = []record.Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: nil}, {Key: "b", Value: []byte{}}}
	in[3].Headers = []record.Header{{Key: "x", Value: []byte("y")}}
	res, err := tr.Transform(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(in) {
		t.Fatalf("%d results for %d records", len(res), len(in))
	}
	want0 := record.Record{
		Key: []byte("k"), Value: []byte("ABC"), Topic: "t", Partition: 2, Offset: 7, Timestamp: in[0].Timestamp,
		Headers: []record.Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: nil}, {Key: "b", Value: []byte{}}, {Key: "seen", Value: []byte("1")}},
	}
	tests := []struct {
		name    string
		got     plugins.Result
		want    []record.Record
		wantErr string
	}{
		{"upper", res[0], []record.Record{want0}, ""},
		{"poison", res[1], nil, "poison record"},
		{"drop", res[2], nil, ""},
		{"keep", res[3], []record.Record{in[3]}, ""},
		{"dup", res[4], []record.Record{in[4], in[4]}, ""},
		{"nulls", res[5], []record.Record{{Key: []byte{}, Value: nil, Partition: 0, Offset: 0, Headers: []record.Header{{Key: "seen", Value: []byte("1")}}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantErr != "" {
				if tt.got.Err == nil || tt.got.Err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", tt.got.Err, tt.wantErr)
				}
				return
			}
			if tt.got.Err != nil {
				t.Fatal(tt.got.Err)
			}
			if !recordsEqual(tt.got.Records, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", tt.got.Records, tt.want)
			}
		})
	}
}

// recordsEqual compares records, telling nil from empty byte slices.
func recordsEqual(a, b []record.Record) bool {
	bytesEq := func(x, y []byte) bool { return (x == nil) == (y == nil) && bytes.Equal(x, y) }
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !bytesEq(x.Key, y.Key) || !bytesEq(x.Value, y.Value) || !x.Timestamp.Equal(y.Timestamp) ||
			x.Topic != y.Topic || x.Partition != y.Partition || x.Offset != y.Offset || len(x.Headers) != len(y.Headers) {
			return false
		}
		for j := range x.Headers {
			if x.Headers[j].Key != y.Headers[j].Key || !bytesEq(x.Headers[j].Value, y.Headers[j].Value) {
				return false
			}
		}
	}
	return true
}

func TestCodec(t *testing.T) {
	p, s := openTest(t, "codec", nil, nil)
	c := p.(plugins.Codec)
	enc, err := c.Encode(context.Background(), [][]byte{[]byte("abc"), []byte("poison"), nil})
	if err != nil {
		t.Fatal(err)
	}
	if string(enc[0].Data) != "ABC" || enc[0].Err != nil || enc[1].Err == nil || enc[2].Err != nil || enc[2].Data == nil || len(enc[2].Data) != 0 {
		t.Fatalf("encode: %+v", enc)
	}
	dec, err := c.Decode(context.Background(), [][]byte{[]byte("XyZ")})
	if err != nil || string(dec[0].Data) != "xyz" {
		t.Fatalf("decode: %+v, %v", dec, err)
	}
	// A codec does not serve TRANSFORM: the plugin answers UNIMPLEMENTED.
	_, err = s.process(context.Background(), pluginv1.Op_OP_TRANSFORM, pluginv1.FromRecords([]record.Record{rec("a")}))
	if err == nil || !strings.Contains(err.Error(), "does not serve op OP_TRANSFORM") {
		t.Fatalf("transform on a codec: %v", err)
	}
}

func TestSink(t *testing.T) {
	file := filepath.Join(t.TempDir(), "out")
	p, _ := openTest(t, "sink", map[string]any{"sink_file": file}, nil)
	errs, err := p.(plugins.Sink).Write(context.Background(), []record.Record{rec("a"), rec("poison"), rec("b")})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("errs %v", errs)
	}
	if b, _ := os.ReadFile(file); string(b) != "a\nb\n" {
		t.Fatalf("sink wrote %q", b)
	}
}

func TestOpenErrors(t *testing.T) {
	bin := testPlugin(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("#!/bin/sh\necho hello\nsleep 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	exitsAtOnce := filepath.Join(dir, "exits")
	if err := os.WriteFile(exitsAtOnce, []byte("#!/bin/sh\necho oops >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(dir, "notexec")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(mustRead(t, bin))

	tests := []struct {
		name    string
		path    string
		env     map[string]string
		opts    plugins.Options
		wantErr string
	}{
		{"missing", filepath.Join(dir, "nope"), nil, plugins.Options{}, "no such file"},
		{"not executable", notExec, nil, plugins.Options{}, "not an executable"},
		{"no handshake", garbage, nil, plugins.Options{}, "Unrecognized remote plugin message"},
		{"exits", exitsAtOnce, nil, plugins.Options{}, "start: "},
		{"protocol v2 only", bin, map[string]string{"STREAMD_TESTPLUGIN_PROTOCOL": "2"}, plugins.Options{}, "this streamd supports native protocol v1"},
		{"checksum mismatch", bin, nil, plugins.Options{Native: plugins.NativeOptions{Checksum: strings.Repeat("ab", 32)}}, "does not match the configured checksum"},
		{"checksum malformed", bin, nil, plugins.Options{Native: plugins.NativeOptions{Checksum: "xyz"}}, `checksum "xyz" is not a hex SHA-256`},
		{"wrong kind", bin, nil, plugins.Options{Kind: plugins.KindSink}, "plugin testplugin is a transform, the config needs a sink"},
		{"config refused", bin, nil, plugins.Options{Config: map[string]any{"reject": "bad port"}}, "config refused: bad port"},
		{"checksum ok", bin, nil, plugins.Options{Native: plugins.NativeOptions{Checksum: hex.EncodeToString(sum[:])}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			p, err := open(context.Background(), tt.path, tt.opts, fastSup)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				testenv.Close(t, context.Background(), p)
				return
			}
			if err == nil {
				testenv.Close(t, context.Background(), p)
				t.Fatalf("opened; want error %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("error %q does not name the plugin path", err)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The magic cookie keeps a plugin from running as a plain program.
func TestPluginRefusesToRunWithoutHost(t *testing.T) {
	out, err := exec.Command(testPlugin(t)).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v", err)
	}
	if !strings.Contains(string(out), "plugin") {
		t.Fatalf("output %q", out)
	}
}

func TestStderrToLog(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, _ := openTest(t, "transform", map[string]any{"stderr": "hello from the plugin"}, func(o *plugins.Options) { o.Logger = logger })
	// The plugin writes both lines in Init; they reach the log when the
	// host's stderr reader has read them, which a loaded machine can
	// delay past Close.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s := buf.String(); strings.Contains(s, `"msg":"hello from the plugin"`) && strings.Contains(s, `"msg":"structured hello from the plugin"`) {
			break
		}
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var plain, structured map[string]any
	for _, m := range logLines(t, &buf) {
		switch m["msg"] {
		case "hello from the plugin":
			plain = m
		case "structured hello from the plugin":
			structured = m
		}
	}
	if plain == nil || plain["plugin"] != "testplugin" || plain["stream"] != "stderr" || plain["level"] != "INFO" {
		t.Fatalf("plain stderr line logged as %v\nlog:\n%s", plain, buf.String())
	}
	if structured == nil || structured["plugin"] != "testplugin" || structured["level"] != "WARN" || structured["answer"] != 42.0 {
		t.Fatalf("structured stderr line logged as %v\nlog:\n%s", structured, buf.String())
	}
}

func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

func TestCloseClean(t *testing.T) {
	p, s := openTest(t, "transform", nil, nil)
	pid := s.pid()
	// A nil error means the plugin exited by itself: a kill at the deadline
	// returns "did not exit within …; killed".
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Fatalf("process %d still exists after Close", pid)
	}
	if _, err := p.(plugins.Transformer).Transform(context.Background(), []record.Record{rec("a")}); !errors.Is(err, errClosed) {
		t.Fatalf("transform after close: %v", err)
	}
}

// A plugin that hangs on shutdown (and ignores SIGTERM) is killed after the
// shutdown deadline; Close returns within it.
func TestCloseKillsHangingPlugin(t *testing.T) {
	const deadline = 700 * time.Millisecond
	p, s := openTest(t, "transform", map[string]any{"hang_on_shutdown": true}, func(o *plugins.Options) { o.Native.ShutdownTimeout = deadline })
	pid := s.pid()
	start := time.Now()
	err := p.Close(context.Background())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("close: %v, want a 'killed' error", err)
	}
	if took < deadline || took > deadline+5*time.Second {
		t.Fatalf("close took %s, want about %s", took, deadline)
	}
	if !processGone(pid) {
		t.Fatalf("process %d still exists after Close", pid)
	}

	// ctx's deadline, when earlier, wins.
	p2, s2 := openTest(t, "transform", map[string]any{"hang_on_shutdown": true}, func(o *plugins.Options) { o.Native.ShutdownTimeout = time.Minute })
	pid = s2.pid()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start = time.Now()
	if err := p2.Close(ctx); err != nil { // the deadline may cut it short: what counts is how long it took
		t.Logf("close: %v", err)
	}
	if took := time.Since(start); took > deadline+5*time.Second {
		t.Fatalf("close with ctx deadline %s took %s", deadline, took)
	}
	if !processGone(pid) {
		t.Fatalf("process %d still exists after Close", pid)
	}
}

func TestRestartRetriesBatch(t *testing.T) {
	crash := filepath.Join(t.TempDir(), "crash")
	p, s := openTest(t, "transform", map[string]any{"crash_file": crash}, nil)
	tr := p.(plugins.Transformer)
	pid := s.pid()
	if err := os.WriteFile(crash, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := tr.Transform(context.Background(), []record.Record{rec("a"), rec("b")})
	if err != nil {
		t.Fatal(err)
	}
	if string(res[0].Records[0].Value) != "A" || string(res[1].Records[0].Value) != "B" {
		t.Fatalf("results after restart: %+v", res)
	}
	if s.pid() == pid || s.restarts != 1 {
		t.Fatalf("pid %d -> %d, restarts %d; want a new process", pid, s.pid(), s.restarts)
	}
	if err := p.(interface{ Health() error }).Health(); err != nil {
		t.Fatalf("health after one crash: %v", err)
	}
}

func TestRepeatedCrashesFail(t *testing.T) {
	p, s := openTest(t, "transform", map[string]any{"crash_always": true}, nil)
	_, err := p.(plugins.Transformer).Transform(context.Background(), []record.Record{rec("a")})
	if err == nil || !strings.Contains(err.Error(), "failed: 3 crashes within 1m0s") {
		t.Fatalf("transform: %v", err)
	}
	h := p.(interface{ Health() error }).Health()
	if h == nil || h.Error() != err.Error() {
		t.Fatalf("health %v, want %v", h, err)
	}
	if s.restarts != 2 {
		t.Fatalf("restarts %d, want 2 (3 crashes)", s.restarts)
	}
	// Later calls fail at once.
	if _, err2 := p.(plugins.Transformer).Transform(context.Background(), []record.Record{rec("a")}); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second call: %v", err2)
	}
}

func TestCallTimeout(t *testing.T) {
	p, s := openTest(t, "transform", map[string]any{"sleep_ms": 400}, func(o *plugins.Options) { o.Timeout = 100 * time.Millisecond })
	pid := s.pid()
	_, err := p.(plugins.Transformer).Transform(context.Background(), []record.Record{rec("a")})
	if err == nil || !strings.Contains(err.Error(), "no answer within 100ms") || !errors.Is(err, plugins.ErrTimeout) {
		t.Fatalf("transform: %v (want plugins.ErrTimeout)", err)
	}
	time.Sleep(50 * time.Millisecond)
	if !processGone(pid) {
		t.Fatalf("stuck process %d not killed", pid)
	}
}

// kill -9 the plugin process over and over while batches stream through it:
// every batch comes back complete and in order.
func TestKill9MidStream(t *testing.T) {
	p, s := openTest(t, "transform", map[string]any{"sleep_ms": 2}, nil)
	s.sup.maxCrashes = 1000
	tr := p.(plugins.Transformer)
	stop := make(chan struct{})
	killed := make(chan int, 100)
	go func() {
		defer close(killed)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			if pid := s.pidUnlocked(); pid != 0 {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed <- pid
				}
			}
		}
	}()
	var got []string
	const batches, size = 60, 16
	for b := 0; b < batches; b++ {
		in := make([]record.Record, size)
		for i := range in {
			in[i] = rec(fmt.Sprintf("r%04d", b*size+i))
		}
		res, err := tr.Transform(context.Background(), in)
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		for _, r := range res {
			for _, o := range r.Records {
				got = append(got, string(o.Value))
			}
		}
	}
	close(stop)
	n := 0
	for range killed {
		n++
	}
	if n < 2 {
		t.Fatalf("only %d kills landed; the test did not exercise restarts", n)
	}
	want := make([]string, batches*size)
	for i := range want {
		want[i] = fmt.Sprintf("R%04d", i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after %d kills: got %d records, want %d in order", n, len(got), len(want))
	}
	t.Logf("%d kill -9s, %d restarts, %d records all present", n, s.restarts, len(got))
}

// newTextLogger logs one line per record: newlines inside values are quoted.
func newTextLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestHelperHost is not a test: TestPluginDiesWithHost runs the test binary
// as a host process that opens a plugin, prints its pid and waits.
func TestHelperHost(t *testing.T) {
	bin := os.Getenv("STREAMD_NATIVE_HELPER_HOST")
	if bin == "" {
		return // run as a test: nothing to do (like os/exec's TestHelperProcess)
	}
	p, err := open(context.Background(), bin, plugins.Options{}, fastSup)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("pid %d\n", p.(*transformPlugin).sup().pid())
	time.Sleep(time.Minute)
}

// A plugin process does not outlive a host that is killed with SIGKILL
// (Linux: parent-death signal).
func TestPluginDiesWithHost(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHost$", "-test.v")
	cmd.Env = append(os.Environ(), "STREAMD_NATIVE_HELPER_HOST="+testPlugin(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }() // it may have been killed below
	var pid int
	buf := make([]byte, 4096)
	var seen []byte
	deadline := time.Now().Add(30 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		seen = append(seen, buf[:n]...)
		for _, l := range strings.Split(string(seen), "\n") {
			_, _ = fmt.Sscanf(l, "pid %d", &pid) // a line that is not the pid leaves it 0
		}
		if err != nil {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("helper printed no pid:\n%s", seen)
	}
	if processGone(pid) {
		t.Fatalf("plugin %d not running", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "killed"
	for i := 0; i < 100 && !processGone(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if !processGone(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL) // cleanup; the test fails below
		t.Fatalf("plugin %d outlived its host", pid)
	}
}

// A negative Timeout means no call timeout: a slow call is waited for.
func TestNoTimeout(t *testing.T) {
	p, s := openTest(t, "transform", map[string]any{"sleep_ms": 300}, func(o *plugins.Options) { o.Timeout = -1 })
	pid := s.pid()
	res, err := p.(plugins.Transformer).Transform(context.Background(), []record.Record{rec("a")})
	if err != nil || string(res[0].Records[0].Value) != "A" {
		t.Fatalf("transform: %v, %v", res, err)
	}
	if s.pid() != pid {
		t.Fatal("process replaced")
	}
}

// Pool starts that many processes; calls run on them in parallel, and all
// stop on Close.
func TestPool(t *testing.T) {
	p, _ := openTest(t, "transform", map[string]any{"sleep_ms": 200}, func(o *plugins.Options) { o.Pool = 3 })
	np := p.(*transformPlugin).nativePlugin
	if len(np.sups) != 3 {
		t.Fatalf("%d processes, want 3", len(np.sups))
	}
	var pids []int
	for _, s := range np.sups {
		pids = append(pids, s.pid())
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.(plugins.Transformer).Transform(context.Background(), []record.Record{rec("a")})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Fatalf("process %d still running after Close", pid)
		}
	}
	if _, err := p.(plugins.Transformer).Transform(context.Background(), []record.Record{rec("a")}); !errors.Is(err, errClosed) {
		t.Fatalf("after close: %v", err)
	}
}
