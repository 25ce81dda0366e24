package conformance

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/internal/plugincli"
	"github.com/streamd/streamd/internal/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
	"github.com/streamd/streamd/record"
)

// language names the build in messages.
const language = "C"

// builder builds one plugin once per test binary.
type builder struct {
	name string
	// args is the build command for the plugin in dir (the orders-downgrade
	// source directory), writing out.
	args func(dir, out string) []string
	once sync.Once
	path string
	err  error
}

var (
	downgradeBuild = &builder{name: "orders-downgrade", args: func(dir, out string) []string {
		return []string{filepath.Join(dir, "..", "build-plugin.sh"), out,
			filepath.Join(dir, "plugin.c"), filepath.Join(dir, "downgrade.c")}
	}}
	identityBuild = &builder{name: "identity", args: func(dir, out string) []string {
		return []string{filepath.Join(dir, "..", "build-plugin.sh"), out,
			filepath.Join(dir, "..", "identity", "identity.c")}
	}}

	tmpMu   sync.Mutex
	tmpDirs []string
)

// srcDir is examples/wasm/c/orders-downgrade.
func srcDir(tb testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func repoRoot(tb testing.TB) string {
	return filepath.Join(srcDir(tb), "..", "..", "..", "..")
}

// build builds the orders-downgrade plugin and returns its path.
func build(tb testing.TB) string {
	tb.Helper()
	return downgradeBuild.get(tb)
}

// get builds b's plugin into a temporary directory, once.
func (b *builder) get(tb testing.TB) string {
	tb.Helper()
	testenv.Tool(tb, "clang")
	testenv.Tool(tb, "wasm-ld")
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "streamd-c-"+b.name+"-")
		if err != nil {
			b.err = err
			return
		}
		tmpMu.Lock()
		tmpDirs = append(tmpDirs, dir)
		tmpMu.Unlock()
		b.path = filepath.Join(dir, "plugin.wasm")
		args := b.args(srcDir(tb), b.path)
		cmd := exec.Command(args[0], args[1:]...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.err = err
			if strings.Contains(out.String(), "sysroot is missing") {
				b.err = errMissingToolchain
			}
			tb.Logf("build output:\n%s", out.String())
		}
	})
	if b.err == errMissingToolchain {
		testenv.Missing(tb, "wasi-libc (run scripts/install-tools)")
	}
	if b.err != nil {
		tb.Fatalf("building the %s %s plugin: %v", language, b.name, b.err)
	}
	return b.path
}

type sentinel string

func (s sentinel) Error() string { return string(s) }

const errMissingToolchain = sentinel("the Wasm toolchain is missing")

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tmpDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// TestFixture runs the conformance fixture as `streamd plugin test` does.
func TestFixture(t *testing.T) {
	path := build(t)
	root := repoRoot(t)
	var stdout, stderr bytes.Buffer
	code := plugincli.Main(context.Background(), []string{"test", path,
		"--input", filepath.Join(root, "examples/wasm/testdata/orders-v2.jsonl"),
		"--expect", filepath.Join(root, "examples/wasm/testdata/orders-v1.expected.jsonl"),
	}, &stdout, &stderr, plugincli.OpenDefault)
	if code != 0 {
		t.Fatalf("streamd plugin test: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestManifest checks what the plugin says about itself.
func TestManifest(t *testing.T) {
	p := open(t)
	want := plugins.Manifest{Name: "orders-downgrade", Kind: plugins.KindTransform, Version: "1.0.0", ABI: 1}
	if got := p.Manifest(); got != want {
		t.Fatalf("manifest %+v, want %+v", got, want)
	}
}

func open(tb testing.TB) plugins.Plugin {
	tb.Helper()
	return openPath(tb, build(tb))
}

func openPath(tb testing.TB, path string) plugins.Plugin {
	tb.Helper()
	ctx := context.Background()
	p, err := wasm.Open(ctx, path, plugins.Options{Kind: plugins.KindTransform, Pool: 1})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { p.Close(ctx) })
	return p
}

// reference is what the downgrade must make of r: the Go reference's value,
// key and timestamp kept, fluid-schema-version headers replaced by one "1".
func reference(r record.Record) ([]byte, []record.Header, error) {
	v, err := downgrade.Value(nil, r.Value)
	if err != nil {
		return nil, nil, err
	}
	var hs []record.Header
	for _, h := range r.Headers {
		if h.Key != downgrade.SchemaHeader {
			hs = append(hs, h)
		}
	}
	return v, append(hs, record.Header{Key: downgrade.SchemaHeader, Value: []byte("1")}), nil
}

var seeds = []string{
	`{"order_id":"o-1","customer":{"id":"c-1","name":"Ann"},"amount_cents":1299,"currency":"EUR","tags":["a",1,true,null,{"x":[]}]}`,
	` { "order_id" : "o\u00e9\/\"\\\b\f\n\r\t\u0001\u001f\ud83d\ude00" , "customer" : { "id" : "\u2028x" } , "amount_cents" : -0 , "currency" : "\u007f" } `,
	`{"order_id":"a","customer":{"id":"b"},"amount_cents":-9223372036854775808,"currency":"c"}`,
	`{"order_id":"a","customer":{"id":"b"},"amount_cents":9223372036854775808,"currency":"c"}`,
	`{"order_id":"a","customer":{"id":"b"},"amount_cents":1e2,"currency":"c"}`,
	`{"order_id":"a","customer":{"id":"b","\u0069d":"c"},"amount_cents":1,"currency":"c"}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"a":0}`,
	`{"order_id":"a","customer":{"id":"b"},"amount_cents":1,"currency":"\ud800\u0041"}`,
	"{\"order_id\":\"\xed\xa0\x80\",\"customer\":{\"id\":\"b\"},\"amount_cents\":1,\"currency\":\"c\"}",
	"{\"order_id\":\"\xf0\x9f\x98\x80\",\"customer\":{\"id\":\"\"},\"amount_cents\":0,\"currency\":\"\"}\r\n",
	`{"order_id":"a","customer":{"id":"b"},"amount_cents":1,"currency":"c","t":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`{"order_id":"a","customer":{"id":"b"},"amount_cents":1,"currency":"c","t":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`[]`, `null`, ``, `{}`, `{"order_id":1}`, "\ufeff{}",
}

// FuzzDowngrade runs random values through the Wasm plugin and checks the
// result against the Go reference byte for byte: the same values succeed,
// with the same output record.
func FuzzDowngrade(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), false, uint8(3))
	}
	f.Add([]byte(nil), true, uint8(0))
	fixture, err := os.Open(filepath.Join(repoRoot(f), "examples/wasm/testdata/orders-v2.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	defer fixture.Close()
	for rd := record.NewReader(fixture, fixture.Name()); ; {
		r, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Fatal(err)
		}
		f.Add(r.Value, r.Value == nil, uint8(len(r.Headers)))
	}
	p := open(f)
	tr := p.(plugins.Transformer)
	headers := []record.Header{
		{Key: "a", Value: []byte("1")}, {Key: downgrade.SchemaHeader, Value: []byte("2")},
		{Key: "b"}, {Key: downgrade.SchemaHeader}, {Key: "", Value: []byte{}},
	}
	f.Fuzz(func(t *testing.T, value []byte, null bool, nh uint8) {
		if null {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		r := record.Record{
			Key: []byte("k"), Value: value, Timestamp: time.UnixMilli(1_700_000_000_123),
			Headers: headers[:int(nh)%(len(headers)+1)], Partition: 3, Offset: 9,
		}
		res, err := tr.Transform(context.Background(), []record.Record{r})
		if err != nil {
			t.Fatalf("batch failed: %v", err)
		}
		wantV, wantH, wantErr := reference(r)
		got := res[0]
		switch {
		case wantErr != nil && got.Err == nil:
			t.Fatalf("%q: the %s plugin accepted it (%q), the reference says %v", value, language, got.Records[0].Value, wantErr)
		case wantErr != nil:
			return
		case got.Err != nil:
			t.Fatalf("%q: the %s plugin says %v, the reference gives %q", value, language, got.Err, wantV)
		case len(got.Records) != 1:
			t.Fatalf("%q: %d records, want 1", value, len(got.Records))
		}
		o := got.Records[0]
		if !bytes.Equal(o.Value, wantV) || !bytes.Equal(o.Key, r.Key) || !o.Timestamp.Equal(r.Timestamp) {
			t.Fatalf("%q:\n got %q key %q ts %v\nwant %q key %q ts %v", value, o.Value, o.Key, o.Timestamp, wantV, r.Key, r.Timestamp)
		}
		if len(o.Headers) != len(wantH) {
			t.Fatalf("headers %v, want %v", o.Headers, wantH)
		}
		for i := range wantH {
			if o.Headers[i].Key != wantH[i].Key || !bytes.Equal(o.Headers[i].Value, wantH[i].Value) ||
				(o.Headers[i].Value == nil) != (wantH[i].Value == nil) {
				t.Fatalf("headers %v, want %v", o.Headers, wantH)
			}
		}
	})
}
