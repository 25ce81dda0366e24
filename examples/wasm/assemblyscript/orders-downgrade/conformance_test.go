package ordersdowngrade_test

// Differential tests of the AssemblyScript orders-downgrade plugin against
// the Go reference (examples/wasm/go/orders-downgrade/downgrade), through the
// real Wasm host (plugins/wasm): for any value, both must reject it, or both
// must produce the same bytes. FuzzDowngrade explores values beyond the
// fixture:
//
//	go test ./examples/wasm/assemblyscript/orders-downgrade/ -run '^$' -fuzz FuzzDowngrade -fuzztime 20s

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
	"github.com/streamd/streamd/record"
)

var (
	buildMu   sync.Mutex
	buildErrs = map[string]error{}
)

// sources are the files a plugin.wasm in dir is built from.
func sources(dir string) []string {
	return []string{
		filepath.Join(dir, "assembly"),
		filepath.Join(dir, "package-lock.json"),
		filepath.Join(dir, "..", "build-plugin.sh"),
		filepath.Join(dir, "..", "..", "..", "..", "sdk", "assemblyscript", "assembly", "index.ts"),
	}
}

// stale reports whether dir/plugin.wasm is missing or older than a source
// (for a directory, any file in it).
func stale(dir string) bool {
	w, err := os.Stat(filepath.Join(dir, "plugin.wasm"))
	if err != nil {
		return true
	}
	newer := false
	for _, s := range sources(dir) {
		err := filepath.Walk(s, func(_ string, fi os.FileInfo, err error) error {
			if err != nil || fi.ModTime().After(w.ModTime()) {
				newer = true
			}
			return nil
		})
		if err != nil || newer {
			return true
		}
	}
	return false
}

// pluginPath returns dir/plugin.wasm (dir relative to this package),
// building it with dir/build.sh (npm ci + asc) when it is stale, at most once
// per test process; it skips (fails under STREAMD_REQUIRE_ALL=1) without
// node/npm. Fuzz workers find it fresh: the coordinator built it.
func pluginPath(tb testing.TB, dir string) string {
	tb.Helper()
	testenv.Tool(tb, "node")
	testenv.Tool(tb, "npm")
	buildMu.Lock()
	defer buildMu.Unlock()
	err, done := buildErrs[dir]
	if !done {
		if stale(dir) {
			out, berr := exec.Command("sh", filepath.Join(dir, "build.sh")).CombinedOutput()
			if berr != nil {
				err = fmt.Errorf("%s/build.sh: %w\n%s", dir, berr, out)
			}
		}
		buildErrs[dir] = err
	}
	if err != nil {
		tb.Fatal(err)
	}
	p, aerr := filepath.Abs(filepath.Join(dir, "plugin.wasm"))
	if aerr != nil {
		tb.Fatal(aerr)
	}
	return p
}

func open(tb testing.TB) plugins.Transformer {
	tb.Helper()
	ctx := context.Background()
	p, err := wasm.Open(ctx, pluginPath(tb, "."), plugins.Options{Kind: plugins.KindTransform, Pool: 1})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close(ctx) })
	if m := p.Manifest(); m.Name != "orders-downgrade" || m.Version != "1.0.0" || m.ABI != 1 {
		tb.Fatalf("manifest %+v", m)
	}
	return p.(plugins.Transformer)
}

// reference is what the Go reference makes of r: the output record, or an
// error.
func reference(r record.Record) (record.Record, error) {
	v, err := downgrade.Value(nil, r.Value)
	if err != nil {
		return record.Record{}, err
	}
	out := record.Record{Key: r.Key, Value: v, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		if h.Key != downgrade.SchemaHeader {
			out.Headers = append(out.Headers, h)
		}
	}
	out.Headers = append(out.Headers, record.Header{Key: downgrade.SchemaHeader, Value: []byte("1")})
	return out, nil
}

// compare checks one plugin result against the reference for input in.
func compare(t *testing.T, in record.Record, got plugins.Result) {
	t.Helper()
	want, werr := reference(in)
	switch {
	case werr != nil && got.Err == nil:
		t.Fatalf("value %q: reference rejects it (%v), plugin made %d records", in.Value, werr, len(got.Records))
	case werr == nil && got.Err != nil:
		t.Fatalf("value %q: plugin rejects it (%v), reference made %s", in.Value, got.Err, want.Value)
	case werr != nil:
		return
	}
	if len(got.Records) != 1 {
		t.Fatalf("value %q: plugin made %d records, want 1", in.Value, len(got.Records))
	}
	g := got.Records[0]
	if !bytes.Equal(g.Value, want.Value) {
		t.Fatalf("value %q:\n got %s\nwant %s", in.Value, g.Value, want.Value)
	}
	if !bytes.Equal(g.Key, want.Key) || (g.Key == nil) != (want.Key == nil) {
		t.Fatalf("value %q: key %q, want %q", in.Value, g.Key, want.Key)
	}
	if !g.Timestamp.Equal(want.Timestamp) {
		t.Fatalf("value %q: timestamp %v, want %v", in.Value, g.Timestamp, want.Timestamp)
	}
	if len(g.Headers) != len(want.Headers) {
		t.Fatalf("value %q: headers %q, want %q", in.Value, g.Headers, want.Headers)
	}
	for i := range g.Headers {
		gh, wh := g.Headers[i], want.Headers[i]
		if gh.Key != wh.Key || !bytes.Equal(gh.Value, wh.Value) || (gh.Value == nil) != (wh.Value == nil) {
			t.Fatalf("value %q: header %d = %q, want %q", in.Value, i, gh, wh)
		}
	}
}

func fixture(tb testing.TB) []record.Record {
	tb.Helper()
	f, err := os.Open("../../testdata/orders-v2.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	defer testenv.Ignore(f.Close) // read only
	var recs []record.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		r, err := record.DecodeJSON(sc.Bytes())
		if err != nil {
			tb.Fatalf("fixture line %d: %v", len(recs)+1, err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return recs
}

// extra values where a byte-level parser could go wrong.
var extra = []string{
	`{"order_id":"\u0000\u001f\u007f\u0080\u07ff\u0800\uffff\ud800\udc00\udbff\udfff","customer":{"id":"\"\\\/\b\f\n\r\t"},"amount_cents":-0,"currency":"\u00E9"}`,
	`{"order\u005fid":"o","customer":{"\u0069d":"c"},"amount_cents":1,"currency":"E","order_id":"dup"}`,
	`{"order_id":"o","customer":{"id":"c","id2":{"id":1,"id":2}},"amount_cents":1,"currency":"E"}`,
	` {"order_id":"o","customer":{"id":"c"},"amount_cents":-9223372036854775808,"currency":"E"} `,
	`{"order_id":"o","customer":{"id":"c"},"amount_cents":-9223372036854775809,"currency":"E"}`,
	`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","x":[1,-0.5e+7,0E0,true,false,null,{}]}`,
	`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","x":"\ud800\u0041"}`,
	`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","x":"\uDBFF\uDFFF"}`,
	`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","x":tru}`,
	`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E"`,
	`{"order_id":"o","customer":{"id":"c"},"amount_cents":01,"currency":"E"}`,
	"{\"order_id\":\"\xef\xbf\xbd\xf4\x8f\xbf\xbf\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"E\"}",
	"{\"order_id\":\"\xed\xa0\x80\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"E\"}",
	"{\"order_id\":\"o\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"E\",\"\xc0\xaf\":1}",
	`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","tags":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`,
	`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","tags":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
	`{"order_id":"o","customer":{"id":"c","x":` + strings.Repeat(`{"a":`, 62) + `1` + strings.Repeat("}", 62) + `},"amount_cents":1,"currency":"E"}`,
	`{"order_id":"o","customer":{"id":"c","x":` + strings.Repeat(`{"a":`, 63) + `1` + strings.Repeat("}", 63) + `},"amount_cents":1,"currency":"E"}`,
	`{"order_id":` + strings.Repeat("[", 70) + `,"customer":{"id":"c"},"amount_cents":1,"currency":"E"}`,
}

func TestFixtureMatchesReference(t *testing.T) {
	tr := open(t)
	recs := fixture(t)
	for _, v := range extra {
		recs = append(recs, record.Record{Key: []byte("x"), Value: []byte(v), Timestamp: time.UnixMilli(1)})
	}
	// Headers with repeats, nulls and the schema header in several places.
	recs = append(recs, record.Record{Value: []byte(`{"order_id":"h","customer":{"id":"c"},"amount_cents":1,"currency":"E"}`),
		Headers: []record.Header{{Key: "fluid-schema-version", Value: []byte("2")}, {Key: "a"}, {Key: "a", Value: []byte{}}, {Key: "fluid-schema-version"}, {Key: "b", Value: []byte{0xff}}}})
	res, err := tr.Transform(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	for i := range recs {
		compare(t, recs[i], res[i])
	}
}

func FuzzDowngrade(f *testing.F) {
	tr := open(f)
	for _, r := range fixture(f) {
		f.Add(r.Value)
	}
	for _, v := range extra {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		in := record.Record{Key: []byte("k"), Value: v, Timestamp: time.UnixMilli(1700000000123),
			Headers: []record.Header{{Key: "fluid-schema-version", Value: []byte("2")}, {Key: "t", Value: []byte("x")}}}
		res, err := tr.Transform(context.Background(), []record.Record{in})
		if err != nil {
			t.Fatalf("value %q: batch failed: %v", v, err)
		}
		compare(t, in, res[0])
	})
}
