package wasm_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
)

// tmpRoot holds the plugins built for the tests of this binary.
var tmpRoot string

func TestMain(m *testing.M) { testenv.Main(m, &tmpRoot) }

// goPlugin builds examples/wasm/go/DIR once per test binary.
func goPlugin(t *testing.T, dir string) string { return testenv.ExampleGoWasm(t, dir) }

func wat(t *testing.T, name string) string {
	t.Helper()
	return testenv.ExampleWat(t, name)
}

func open(t *testing.T, path string, opts plugins.Options) plugins.Plugin {
	t.Helper()
	opts.Wasm.CacheDir = filepath.Join(tmpRoot, "cache")
	p, err := wasm.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	testenv.CloseAtEnd(t, p)
	return p
}

func TestTransform(t *testing.T) {
	p := open(t, wat(t, "poison"), plugins.Options{Kind: plugins.KindTransform, Pool: 1})
	tr, ok := p.(plugins.Transformer)
	if !ok {
		t.Fatalf("%T is not a Transformer", p)
	}
	in := []record.Record{{Value: []byte("fine")}, {Value: []byte("reject")}, {Value: []byte("poison")}}
	if _, err := tr.Transform(context.Background(), in); !errors.Is(err, runtime.ErrBatch) {
		t.Fatalf("poisoned batch: %v", err)
	}
	res, err := tr.Transform(context.Background(), in[:2])
	if err != nil {
		t.Fatal(err)
	}
	if string(res[0].Records[0].Value) != "fine" || res[1].Err == nil {
		t.Fatalf("results %+v", res)
	}
}

func TestCodec(t *testing.T) {
	p := open(t, goPlugin(t, "base64-codec"), plugins.Options{Kind: plugins.KindCodec})
	c, ok := p.(plugins.Codec)
	if !ok {
		t.Fatalf("%T is not a Codec", p)
	}
	enc, err := c.Encode(context.Background(), [][]byte{[]byte("hello"), {}, nil})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"aGVsbG8=", "", ""}
	for i, e := range enc {
		if e.Err != nil || string(e.Data) != want[i] {
			t.Fatalf("encode %d: %q, %v", i, e.Data, e.Err)
		}
	}
	dec, err := c.Decode(context.Background(), [][]byte{[]byte("aGVsbG8="), []byte("!!")})
	if err != nil {
		t.Fatal(err)
	}
	if string(dec[0].Data) != "hello" || dec[0].Err != nil {
		t.Fatalf("decode 0: %q, %v", dec[0].Data, dec[0].Err)
	}
	if dec[1].Err == nil || !strings.Contains(dec[1].Err.Error(), "not base64") {
		t.Fatalf("decode of bad base64: %v", dec[1].Err)
	}
}

func TestSink(t *testing.T) {
	dir := t.TempDir()
	p := open(t, goPlugin(t, "file-sink"), plugins.Options{
		Kind:   plugins.KindSink,
		Config: map[string]any{"path": "/out/records.txt"},
		Wasm:   plugins.WasmOptions{Dirs: map[string]string{"/out": dir}},
	})
	s, ok := p.(plugins.Sink)
	if !ok {
		t.Fatalf("%T is not a Sink", p)
	}
	errs, err := s.Write(context.Background(), []record.Record{{Value: []byte("one")}, {Value: []byte("two\nlines")}, {Value: []byte("three")}})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("errs %v", errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "records.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "one\nthree\n" {
		t.Fatalf("file holds %q", b)
	}
}

// TestNoFilesByDefault: the same sink without a granted directory cannot
// open its file, so its init refuses.
func TestNoFilesByDefault(t *testing.T) {
	_, err := wasm.Open(context.Background(), goPlugin(t, "file-sink"), plugins.Options{
		Config: map[string]any{"path": "/out/records.txt"},
		Wasm:   plugins.WasmOptions{CacheDir: filepath.Join(tmpRoot, "cache")},
	})
	if err == nil || !strings.Contains(err.Error(), "open /out/records.txt") {
		t.Fatalf("Open without a granted dir: %v", err)
	}
}

func TestKindMismatch(t *testing.T) {
	_, err := wasm.Open(context.Background(), goPlugin(t, "base64-codec"), plugins.Options{Kind: plugins.KindTransform, Wasm: plugins.WasmOptions{CacheDir: filepath.Join(tmpRoot, "cache")}})
	if err == nil || !strings.Contains(err.Error(), "plugin base64 is a codec plugin, not a transform") {
		t.Fatalf("kind mismatch: %v", err)
	}
}

// TestOpenWatched: the hot-reloading plugin serves the new version of the
// file after it changes.
func TestOpenWatched(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plugin.wasm")
	v1, err := os.ReadFile(wat(t, "identity"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, v1, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := wasm.Open(ctx, path, plugins.Options{Kind: plugins.KindTransform, Wasm: plugins.WasmOptions{Watch: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, ctx, p)
	if got := p.Manifest().Name; got != "identity" {
		t.Fatalf("manifest name %q", got)
	}
	// The new version: same name, version 2.0.0 (same manifest length).
	v2 := bytes.Replace(v1, []byte(`"version":"1.0.0"`), []byte(`"version":"2.0.0"`), 1)
	if bytes.Equal(v1, v2) {
		t.Fatal("version string not found in identity.wasm")
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, v2, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for p.Manifest().Version != "2.0.0" {
		if time.Now().After(deadline) {
			t.Fatal("the new version was not picked up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, err := p.(plugins.Transformer).Transform(ctx, []record.Record{{Value: []byte("x")}})
	if err != nil || string(res[0].Records[0].Value) != "x" {
		t.Fatalf("after reload: %+v, %v", res, err)
	}
}
