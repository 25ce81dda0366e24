package native_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/plugincli"
	"github.com/streamd/streamd/internal/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/native"
)

const (
	fixtureIn       = "../../examples/wasm/testdata/orders-v2.jsonl"
	fixtureExpected = "../../examples/wasm/testdata/orders-v1.expected.jsonl"
)

// conformance runs the orders-downgrade fixture through the native plugin at
// path, the way `streamd plugin test` does: record lines must be
// byte-identical, error lines errors for the same input (their reason is free
// text). With sameReasons, the whole output must be byte-identical (the Go
// plugin shares the reference code, so its reasons match too).
func conformance(t *testing.T, path string, sameReasons bool) {
	t.Helper()
	f, err := os.Open(fixtureIn)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := plugincli.DecodeRecords(f, fixtureIn)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(fixtureExpected)
	if err != nil {
		t.Fatal(err)
	}
	p, err := native.Open(context.Background(), path, plugins.Options{Kind: plugins.KindTransform})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if m := p.Manifest(); m != (plugins.Manifest{Name: "orders-downgrade", Kind: plugins.KindTransform, Version: "1.0.0", ABI: 1}) {
		t.Fatalf("manifest %+v", m)
	}
	for _, batch := range []int{1, 7, 256} {
		var got bytes.Buffer
		if err := plugincli.Run(context.Background(), p, plugincli.RunOptions{Batch: batch}, recs, &got); err != nil {
			t.Fatal(err)
		}
		diff, err := plugincli.Compare(got.Bytes(), want)
		if err != nil {
			t.Fatal(err)
		}
		if diff != "" {
			t.Fatalf("batch %d: %s", batch, diff)
		}
		if sameReasons && !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("batch %d: output is equivalent but not byte-identical to %s", batch, fixtureExpected)
		}
	}
}

func TestConformanceGo(t *testing.T) {
	conformance(t, native.BuildPlugin(t, "examples/native/go/orders-downgrade"), true)
}

// pythonPlugin returns the Python example's launcher, or calls
// testenv.Missing when python3 with grpcio is not installed.
func pythonPlugin(t *testing.T) string {
	t.Helper()
	py := testenv.Tool(t, "python3")
	if out, err := exec.Command(py, "-c", "import grpc, grpc_health.v1.health").CombinedOutput(); err != nil {
		testenv.Missing(t, "python3 modules grpcio and grpcio-health-checking (scripts/install-tools): "+strings.TrimSpace(string(out)))
	}
	path, err := filepath.Abs("../../examples/native/python/orders-downgrade/plugin")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConformancePython(t *testing.T) {
	conformance(t, pythonPlugin(t), false)
}

// The Python plugin's stderr reaches the log, and it stops cleanly when
// asked: no kill, no go-plugin warning.
func TestPythonLogAndCleanClose(t *testing.T) {
	path := pythonPlugin(t)
	var buf native.SyncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := native.Open(context.Background(), path, plugins.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	pid := native.PID(p)
	// nil: it exited by itself (a kill at the deadline is an error).
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !native.ProcessGone(pid) {
		t.Fatalf("process %d still exists", pid)
	}
	var serving bool
	for _, m := range native.LogLines(t, &buf) {
		msg, _ := m["msg"].(string)
		if strings.HasPrefix(msg, "orders-downgrade (python") && m["stream"] == "stderr" && m["plugin"] == path {
			serving = true
		}
		if lvl := m["level"]; lvl == "WARN" || lvl == "ERROR" {
			t.Errorf("unexpected %s log: %v", lvl, m)
		}
	}
	if !serving {
		t.Fatalf("the plugin's stderr line is not in the log:\n%s", buf.String())
	}
}
