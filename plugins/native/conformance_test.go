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

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/native"
	"github.com/streamd/streamd/record"
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
	defer testenv.Ignore(f.Close) // read only
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
	defer testenv.Close(t, context.Background(), p)
	if m := p.Manifest(); m != (plugins.Manifest{Name: "orders-downgrade", Kind: plugins.KindTransform, Version: "1.0.0", ABI: 1}) {
		t.Fatalf("manifest %+v", m)
	}
	for _, batch := range []int{1, 7, 256} {
		var got bytes.Buffer
		if _, err := plugincli.Run(context.Background(), p, plugincli.RunOptions{Batch: batch}, recs, &got); err != nil {
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

// FuzzPythonDowngrade is a differential fuzzer: the Python orders-downgrade
// plugin must agree with the Go reference downgrade on every value (same
// output bytes, or both an error).
func FuzzPythonDowngrade(f *testing.F) {
	in, err := os.Open(fixtureIn)
	if err != nil {
		f.Fatal(err)
	}
	recs, err := plugincli.DecodeRecords(in, fixtureIn)
	_ = in.Close() // read only
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range recs {
		f.Add(r.Value)
	}
	f.Add([]byte(`{"order_id":"\ud83d\ude00","customer":{"id":"\u0000"},"amount_cents":-9223372036854775808,"currency":"\/"}`))
	f.Add([]byte(`{"order_id":"a","customer":{"id":"b"},"amount_cents":9223372036854775808,"currency":"c"}`))

	var p plugins.Plugin
	f.Cleanup(func() {
		if p != nil {
			testenv.Close(f, context.Background(), p)
		}
	})
	f.Fuzz(func(t *testing.T, value []byte) {
		if p == nil {
			var err error
			p, err = native.Open(context.Background(), pythonPlugin(t), plugins.Options{Kind: plugins.KindTransform})
			if err != nil {
				t.Fatal(err)
			}
		}
		res, err := p.(plugins.Transformer).Transform(context.Background(), []record.Record{{Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := downgrade.Value(nil, value)
		switch {
		case wantErr != nil && res[0].Err == nil:
			t.Fatalf("%q: Go rejects it (%v), Python gives %q", value, wantErr, res[0].Records[0].Value)
		case wantErr == nil && res[0].Err != nil:
			t.Fatalf("%q: Go gives %q, Python rejects it (%v)", value, want, res[0].Err)
		case wantErr == nil && !bytes.Equal(res[0].Records[0].Value, want):
			t.Fatalf("%q: Go gives %q, Python %q", value, want, res[0].Records[0].Value)
		}
	})
}
