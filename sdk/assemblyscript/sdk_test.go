// Package assemblyscript_test runs the AssemblyScript SDK's Node tests from
// go test, so CI covers them, and drives the SDK's test plugins through the
// real Wasm host (plugins/wasm): they need node and npm (testenv.Missing when
// absent).
package assemblyscript_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
	"github.com/streamd/streamd/record"
)

var (
	nodeOnce sync.Once
	nodeOut  []byte
	nodeErr  error
)

// nodeTests runs test.sh (npm ci + node --test test/) once per process; it
// also leaves the compiled test plugins in test/build.
func nodeTests(tb testing.TB) {
	tb.Helper()
	testenv.Tool(tb, "node")
	testenv.Tool(tb, "npm")
	nodeOnce.Do(func() {
		nodeOut, nodeErr = exec.Command("sh", "test.sh").CombinedOutput()
	})
	if nodeErr != nil {
		tb.Fatalf("test.sh: %v\n%s", nodeErr, nodeOut)
	}
}

func TestSDK(t *testing.T) {
	nodeTests(t)
}

func open(t *testing.T, name string, kind plugins.Kind, config map[string]any) plugins.Plugin {
	t.Helper()
	nodeTests(t)
	ctx := context.Background()
	p, err := wasm.Open(ctx, filepath.Join("test", "build", name+".wasm"), plugins.Options{Kind: kind, Config: config, Pool: 1})
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { _ = p.Close(ctx) })
	return p
}

func TestHostTransform(t *testing.T) {
	p := open(t, "transform", plugins.KindTransform, map[string]any{"prefix": true})
	if m := p.Manifest(); m.Name != "test-transform" || m.Version != `0.1.0-"q"` || m.ABI != 1 {
		t.Fatalf("manifest %+v", m)
	}
	in := []record.Record{
		{Key: []byte("k"), Value: []byte("keep"), Offset: 3},
		{Key: []byte("k"), Value: []byte("two"), Headers: []record.Header{{Key: "a", Value: []byte("1")}, {Key: "a"}}},
		{Value: []byte("reject")},
		{Value: []byte("drop")},
	}
	res, err := p.(plugins.Transformer).Transform(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results", len(res))
	}
	if len(res[0].Records) != 1 || string(res[0].Records[0].Value) != "keep" || res[0].Err != nil {
		t.Errorf("keep: %+v", res[0])
	}
	if len(res[1].Records) != 2 || string(res[1].Records[0].Key) != "p:k2" || string(res[1].Records[1].Value) != "two" ||
		len(res[1].Records[1].Headers) != 2 || res[1].Records[1].Headers[1].Value != nil {
		t.Errorf("two: %+v", res[1])
	}
	if res[2].Err == nil || !strings.Contains(res[2].Err.Error(), "rejected: é") {
		t.Errorf("reject: %+v", res[2])
	}
	if res[3].Err != nil || len(res[3].Records) != 0 {
		t.Errorf("drop: %+v", res[3])
	}
}

func TestHostConfigRefused(t *testing.T) {
	nodeTests(t)
	_, err := wasm.Open(context.Background(), filepath.Join("test", "build", "transform.wasm"), plugins.Options{Config: map[string]any{"refuse": true}, Pool: 1})
	if err == nil || !strings.Contains(err.Error(), "config refused") {
		t.Fatalf("err = %v, want the plugin's refusal", err)
	}
}

func TestHostTrapFailsBatch(t *testing.T) {
	p := open(t, "transform", plugins.KindTransform, nil)
	tr := p.(plugins.Transformer)
	if _, err := tr.Transform(context.Background(), []record.Record{{Value: []byte("assert")}}); err == nil {
		t.Fatal("a trapping record did not fail the batch")
	}
	// The host replaces the instance; the plugin keeps working.
	res, err := tr.Transform(context.Background(), []record.Record{{Value: []byte("keep")}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("after trap: %+v, %v", res, err)
	}
}

func TestHostCodec(t *testing.T) {
	c := open(t, "codec", plugins.KindCodec, nil).(plugins.Codec)
	ctx := context.Background()
	enc, err := c.Encode(ctx, [][]byte{[]byte("abC"), []byte(""), []byte("2xx")})
	if err != nil {
		t.Fatal(err)
	}
	if string(enc[0].Data) != "ABC" || enc[0].Err != nil {
		t.Errorf("encode: %+v", enc[0])
	}
	if len(enc[1].Data) != 0 || enc[1].Err != nil {
		t.Errorf("encode empty: %+v", enc[1])
	}
	if enc[2].Err == nil || !strings.Contains(enc[2].Err.Error(), "exactly one record") {
		t.Errorf("encode two records: %+v", enc[2])
	}
	dec, err := c.Decode(ctx, [][]byte{[]byte("AbC")})
	if err != nil || string(dec[0].Data) != "abc" {
		t.Fatalf("decode: %+v, %v", dec, err)
	}
}

func TestHostSink(t *testing.T) {
	s := open(t, "sink", plugins.KindSink, nil).(plugins.Sink)
	ctx := context.Background()
	errs, err := s.Write(ctx, []record.Record{{Value: []byte("a")}, {Value: []byte("x")}, {Value: []byte("keep")}})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("errs = %v, want [nil, refused, nil]", errs)
	}
	_, err = s.Write(ctx, []record.Record{{Value: []byte("down")}})
	if err == nil || !strings.Contains(err.Error(), "sink down after 2") {
		t.Fatalf("fail(): err = %v", err)
	}
}
