// Package guesttest is the conformance suite that every Wasm guest
// language's orders-downgrade and identity plugins run from Go: it builds
// the plugins with the language's toolchain, runs the conformance fixture
// as `streamd plugin test` does, fuzzes the downgrade against the Go
// reference (examples/wasm/go/orders-downgrade/downgrade) byte for byte,
// round-trips records of every shape through the identity plugin, and
// benchmarks both. A language's test package wires its Lang to a Suite.
package guesttest

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
	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
	"github.com/streamd/streamd/record"
)

// Lang says how to build one guest language's plugins.
type Lang struct {
	// Name is the language, in messages ("C", "Rust").
	Name string
	// Dir is the language's examples folder, relative to examples/wasm
	// ("c", "rust"); its orders-downgrade and identity plugins are built.
	Dir string
	// Tools checks the toolchain, calling testenv.Tool or testenv.Missing.
	Tools func(tb testing.TB)
	// Downgrade and Identity return the command that builds the plugin to
	// out; dir is <Dir>/orders-downgrade.
	Downgrade, Identity func(dir, out string) []string
	// MissingMarker in the build output means part of the toolchain is
	// missing, described by MissingWhat (for testenv.Missing).
	MissingMarker, MissingWhat string
}

// Suite runs the conformance tests for one Lang. Each plugin is built once
// per test binary; call Cleanup from TestMain.
type Suite struct {
	lang                Lang
	downgrade, identity builder
	mu                  sync.Mutex
	tmpDirs             []string
}

type builder struct {
	name string
	args func(dir, out string) []string
	once sync.Once
	path string
	err  error
}

// New returns the suite for l.
func New(l Lang) *Suite {
	return &Suite{lang: l,
		downgrade: builder{name: "orders-downgrade", args: l.Downgrade},
		identity:  builder{name: "identity", args: l.Identity}}
}

// Cleanup removes the built plugins.
func (s *Suite) Cleanup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.tmpDirs {
		_ = os.RemoveAll(d)
	}
}

// repoRoot is the repository root.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
}

// Downgrade builds (once) the orders-downgrade plugin and returns its path.
func (s *Suite) Downgrade(tb testing.TB) string { return s.build(tb, &s.downgrade) }

// Identity builds (once) the identity plugin and returns its path.
func (s *Suite) Identity(tb testing.TB) string { return s.build(tb, &s.identity) }

type sentinel string

func (e sentinel) Error() string { return string(e) }

const errMissingToolchain = sentinel("the Wasm toolchain is missing")

func (s *Suite) build(tb testing.TB, b *builder) string {
	tb.Helper()
	s.lang.Tools(tb)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "streamd-"+strings.ToLower(s.lang.Name)+"-"+b.name+"-")
		if err != nil {
			b.err = err
			return
		}
		s.mu.Lock()
		s.tmpDirs = append(s.tmpDirs, dir)
		s.mu.Unlock()
		b.path = filepath.Join(dir, "plugin.wasm")
		args := b.args(filepath.Join(repoRoot(), "examples", "wasm", s.lang.Dir, "orders-downgrade"), b.path)
		cmd := exec.Command(args[0], args[1:]...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.err = err
			if s.lang.MissingMarker != "" && strings.Contains(out.String(), s.lang.MissingMarker) {
				b.err = errMissingToolchain
			}
			tb.Logf("build output:\n%s", out.String())
		}
	})
	if b.err == errMissingToolchain {
		testenv.Missing(tb, s.lang.MissingWhat)
	}
	if b.err != nil {
		tb.Fatalf("building the %s %s plugin: %v", s.lang.Name, b.name, b.err)
	}
	return b.path
}

// TestFixture runs the conformance fixture as `streamd plugin test` does.
func (s *Suite) TestFixture(t *testing.T) {
	path := s.Downgrade(t)
	root := repoRoot()
	var stdout, stderr bytes.Buffer
	code := plugincli.Main(context.Background(), []string{"test", path,
		"--input", filepath.Join(root, "examples/wasm/testdata/orders-v2.jsonl"),
		"--expect", filepath.Join(root, "examples/wasm/testdata/orders-v1.expected.jsonl"),
	}, &stdout, &stderr, plugincli.OpenDefault)
	if code != 0 {
		t.Fatalf("streamd plugin test: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestManifest checks what the downgrade plugin says about itself.
func (s *Suite) TestManifest(t *testing.T) {
	p := s.open(t, s.Downgrade(t))
	want := plugins.Manifest{Name: "orders-downgrade", Kind: plugins.KindTransform, Version: "1.0.0", ABI: 1}
	if got := p.Manifest(); got != want {
		t.Fatalf("manifest %+v, want %+v", got, want)
	}
}

func (s *Suite) open(tb testing.TB, path string) plugins.Plugin {
	tb.Helper()
	ctx := context.Background()
	p, err := wasm.Open(ctx, path, plugins.Options{Kind: plugins.KindTransform, Pool: 1})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close(ctx) })
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
func (s *Suite) FuzzDowngrade(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), false, uint8(3))
	}
	f.Add([]byte(nil), true, uint8(0))
	fixture, err := os.Open(filepath.Join(repoRoot(), "examples/wasm/testdata/orders-v2.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	defer func() { _ = fixture.Close() }()
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
	p := s.open(f, s.Downgrade(f))
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
			t.Fatalf("%q: the %s plugin accepted it (%q), the reference says %v", value, s.lang.Name, got.Records[0].Value, wantErr)
		case wantErr != nil:
			return
		case got.Err != nil:
			t.Fatalf("%q: the %s plugin says %v, the reference gives %q", value, s.lang.Name, got.Err, wantV)
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

// TestIdentity sends records of every shape through the language's identity
// plugin and expects them back unchanged: null and
// empty keys, values and header values, repeated header names, and values
// large enough to make the SDK grow its input and output buffers.
func (s *Suite) TestIdentity(t *testing.T) {
	p := s.open(t, s.Identity(t))
	want := plugins.Manifest{Name: "identity", Kind: plugins.KindTransform, Version: "1.0.0", ABI: 1}
	if got := p.Manifest(); got != want {
		t.Fatalf("manifest %+v, want %+v", got, want)
	}
	big := bytes.Repeat([]byte("0123456789"), 30_000)
	batches := [][]record.Record{
		{
			{Key: nil, Value: nil},
			{Key: []byte{}, Value: []byte{}, Headers: []record.Header{{Key: "", Value: nil}, {Key: "", Value: []byte{}}}},
			{Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(1_700_000_000_123),
				Headers: []record.Header{{Key: "h", Value: []byte("1")}, {Key: "h", Value: nil}, {Key: "é", Value: []byte{0, 0xff}}}},
		},
		{{Key: big[:70_000], Value: big}},
		make([]record.Record, 1000),
		{{Value: []byte("small again")}},
	}
	for i := range batches[2] {
		batches[2][i] = record.Record{Value: []byte{byte(i)}, Timestamp: time.UnixMilli(int64(i))}
	}
	tr := p.(plugins.Transformer)
	for bi, batch := range batches {
		res, err := tr.Transform(context.Background(), batch)
		if err != nil {
			t.Fatalf("batch %d: %v", bi, err)
		}
		if len(res) != len(batch) {
			t.Fatalf("batch %d: %d results for %d records", bi, len(res), len(batch))
		}
		for i, r := range res {
			in := batch[i]
			if r.Err != nil || len(r.Records) != 1 {
				t.Fatalf("batch %d record %d: %d records, error %v", bi, i, len(r.Records), r.Err)
			}
			out := r.Records[0]
			if !sameBytes(out.Key, in.Key) || !sameBytes(out.Value, in.Value) || out.Timestamp.UnixMilli() != in.Timestamp.UnixMilli() {
				t.Fatalf("batch %d record %d: got key %q value %.40q ts %v, want key %q value %.40q ts %v",
					bi, i, out.Key, out.Value, out.Timestamp, in.Key, in.Value, in.Timestamp)
			}
			if len(out.Headers) != len(in.Headers) {
				t.Fatalf("batch %d record %d: headers %v, want %v", bi, i, out.Headers, in.Headers)
			}
			for h := range in.Headers {
				if out.Headers[h].Key != in.Headers[h].Key || !sameBytes(out.Headers[h].Value, in.Headers[h].Value) {
					t.Fatalf("batch %d record %d: headers %v, want %v", bi, i, out.Headers, in.Headers)
				}
			}
		}
	}
}

// sameBytes tells apart nil (null) and empty.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// benchBatch is 256 orders-v2 records, each with a schema header.
func benchBatch() []record.Record {
	v := []byte(`{"order_id":"o-1","customer":{"id":"c-1","name":"Ann"},"amount_cents":1299,"currency":"EUR","tags":["a",1,true,null,{"x":[]}]}`)
	batch := make([]record.Record, 256)
	for i := range batch {
		batch[i] = record.Record{
			Key: []byte("order-key"), Value: v, Timestamp: time.UnixMilli(1_700_000_000_000),
			Headers: []record.Header{{Key: "fluid-schema-version", Value: []byte("2")}},
		}
	}
	return batch
}

func (s *Suite) benchTransform(b *testing.B, path string) {
	tr := s.open(b, path).(plugins.Transformer)
	batch := benchBatch()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := tr.Transform(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		if res[0].Err != nil {
			b.Fatal(res[0].Err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDowngrade is the orders downgrade through the Wasm host, 256
// records per call; compare with the other languages' BenchmarkDowngrade.
func (s *Suite) BenchmarkDowngrade(b *testing.B) { s.benchTransform(b, s.Downgrade(b)) }

// BenchmarkIdentity is the identity transform on the same batches: the cost
// of the ABI crossing and the SDK alone.
func (s *Suite) BenchmarkIdentity(b *testing.B) { s.benchTransform(b, s.Identity(b)) }
