package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/schema"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
)

// The modules of other hosts' ABIs these tests run are built from those
// hosts' own SDKs by examples/wasm/redpanda/rust, examples/wasm/redpanda/go
// and examples/wasm/fluvio (their build.sh; `make examples`): the SDKs'
// example transforms, unchanged. What each must output is what its SDK's
// documentation and the example's own code say it does.

func rpRust(t *testing.T, name string) string { return testenv.ForeignWasm(t, "redpanda/rust", name) }
func rpGo(t *testing.T, name string) string   { return testenv.ForeignWasm(t, "redpanda/go", name) }
func fluvioSM(t *testing.T, name string) string {
	return testenv.ForeignWasm(t, "fluvio", name)
}

// call runs one batch and fails the test on a batch error.
func call(t *testing.T, m interface {
	Call(context.Context, runtime.Op, []record.Record) ([]plugins.Result, error)
}, in []record.Record) []plugins.Result {
	t.Helper()
	res, err := m.Call(context.Background(), runtime.OpTransform, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(in) {
		t.Fatalf("%d results for %d records", len(res), len(in))
	}
	return res
}

// show writes results as lines to compare: "i: key=value [headers] @ts -> output" or
// "i: error".
func show(res []plugins.Result) string {
	var b strings.Builder
	for i, r := range res {
		if r.Err != nil {
			fmt.Fprintf(&b, "%d: error: %v\n", i, r.Err)
			continue
		}
		for j, o := range r.Records {
			key := "null"
			if o.Key != nil {
				key = fmt.Sprintf("%q", o.Key)
			}
			val := "null"
			if o.Value != nil {
				val = fmt.Sprintf("%q", o.Value)
			}
			fmt.Fprintf(&b, "%d: %s=%s", i, key, val)
			for _, h := range o.Headers {
				fmt.Fprintf(&b, " %s:%q", h.Key, h.Value)
			}
			fmt.Fprintf(&b, " @%d p%d o%d", o.Timestamp.UnixMilli(), o.Partition, o.Offset)
			if r.Outputs != nil && r.Outputs[j] != "" {
				fmt.Fprintf(&b, " -> %s", r.Outputs[j])
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func want(t *testing.T, what string, res []plugins.Result, lines ...string) {
	t.Helper()
	if got, w := show(res), strings.Join(lines, "\n")+"\n"; got != w {
		t.Errorf("%s:\n got:\n%s\nwant:\n%s", what, got, w)
	}
}

// vals makes records of the given values, as recs does.
func vals(values ...string) []record.Record { return recs(values...) }

// TestRedpandaRustExamples: the Rust SDK's example transforms give what
// their code says, record for record: identity copies each record (key,
// value, headers; the timestamp is the input's, as the SDK documents),
// identity_logging also logs "key:value", validation_filter keeps the
// records whose value is JSON, transcoder makes a JSON record of each row
// of a CSV value (whose first row names the columns: the example reads it
// with csv's defaults), and tee writes each record to every output topic.
func TestRedpandaRustExamples(t *testing.T) {
	in := vals("a", `{"x":1}`, "")
	in[2].Value = nil
	t.Run("identity", func(t *testing.T) {
		m := load(t, rpRust(t, "identity"), plugins.Options{Pool: 1})
		if got := m.ABI().String(); got != "redpanda data transforms v2" {
			t.Errorf("ABI %q", got)
		}
		if got := m.Manifest(); got != (plugins.Manifest{Name: "identity", Kind: plugins.KindTransform}) {
			t.Errorf("manifest %+v", got)
		}
		for range 3 { // the same instance, batch after batch
			want(t, "identity", call(t, m, in),
				`0: "k0"="a" h:"x" @1767225600000 p3 o100`,
				`1: "k1"="{\"x\":1}" h:"x" @1767225600001 p3 o101`,
				`2: "k2"=null h:"x" @1767225600002 p3 o102`)
		}
	})
	t.Run("identity_logging", func(t *testing.T) {
		var logs syncBuffer
		m := load(t, rpRust(t, "identity_logging"), plugins.Options{Pool: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		want(t, "identity_logging", call(t, m, in[:2]),
			`0: "k0"="a" h:"x" @1767225600000 p3 o100`,
			`1: "k1"="{\"x\":1}" h:"x" @1767225600001 p3 o101`)
		if s := logs.String(); !strings.Contains(s, `msg=k0:a`) || !strings.Contains(s, `msg="k1:{\"x\":1}"`) {
			t.Errorf("log:\n%s", s)
		}
	})
	t.Run("validation_filter", func(t *testing.T) {
		m := load(t, rpRust(t, "validation_filter"), plugins.Options{Pool: 1})
		want(t, "validation_filter", call(t, m, vals("{}", "nope", "[1,2]", `{"a":`)),
			`0: "k0"="{}" h:"x" @1767225600000 p3 o100`,
			`2: "k2"="[1,2]" h:"x" @1767225600002 p3 o102`)
	})
	t.Run("transcoder", func(t *testing.T) {
		m := load(t, rpRust(t, "transcoder"), plugins.Options{Pool: 1})
		want(t, "transcoder", call(t, m, vals("a,b\nfoo,1\nbar,-2\n", "a,b\n")),
			`0: "k0"="{\"a\":\"foo\",\"b\":1}" @1767225600000 p3 o100`,
			`0: "k0"="{\"a\":\"bar\",\"b\":-2}" @1767225600000 p3 o100`)
		// A row that does not parse fails the transform (it returns the
		// error; the SDK panics on it), so the batch fails: a pipeline
		// then runs its records one by one, and that record alone fails.
		_, err := m.Call(context.Background(), runtime.OpTransform, vals("a,b\nfoo,x\n"))
		if !errors.Is(err, runtime.ErrBatch) || !errors.Is(err, plugins.ErrTrap) || !strings.Contains(err.Error(), "transforming record failed") {
			t.Fatalf("a row that does not parse: %v", err)
		}
		want(t, "transcoder after a failure", call(t, m, vals("a,b\nbaz,3\n")),
			`0: "k0"="{\"a\":\"baz\",\"b\":3}" @1767225600000 p3 o100`)
	})
	t.Run("tee", func(t *testing.T) {
		m := load(t, rpRust(t, "tee"), plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Outputs: []string{"orders", "orders-copy"}}})
		want(t, "tee to two topics", call(t, m, in[:2]),
			`0: "k0"="a" h:"x" @1767225600000 p3 o100`,
			`0: "k0"="a" h:"x" @1767225600000 p3 o100 -> orders-copy`,
			`1: "k1"="{\"x\":1}" h:"x" @1767225600001 p3 o101`,
			`1: "k1"="{\"x\":1}" h:"x" @1767225600001 p3 o101 -> orders-copy`)
		one := load(t, rpRust(t, "tee"), plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Outputs: []string{"orders"}}})
		want(t, "tee to one topic", call(t, one, in[:1]),
			`0: "k0"="a" h:"x" @1767225600000 p3 o100`)
	})
}

// TestRedpandaGoExamples: the Go SDK's example transforms (built with
// GOOS=wasip1 as Redpanda builds Go transforms): the regular expression
// filter keeps the records whose key (or, with MATCH_VALUE=1, value)
// matches PATTERN, both from the stage's config, and refuses to start
// without PATTERN; identity copies; validation sends what is not JSON to
// a second topic; transcoding makes a JSON record of each "key,a,b" row of
// a CSV value, keyed by its first column.
func TestRedpandaGoExamples(t *testing.T) {
	t.Run("regexp_filter", func(t *testing.T) {
		m := load(t, rpGo(t, "regexp_filter"), plugins.Options{Pool: 1, Config: map[string]any{"PATTERN": "^k[02]$"}})
		want(t, "regexp_filter by key", call(t, m, vals("a", "b", "c")),
			`0: "k0"="a" h:"x" @1767225600000 p3 o100`,
			`2: "k2"="c" h:"x" @1767225600002 p3 o102`)
		v := load(t, rpGo(t, "regexp_filter"), plugins.Options{Pool: 1, Config: map[string]any{"PATTERN": "^[ab]+$", "MATCH_VALUE": 1}})
		want(t, "regexp_filter by value", call(t, v, vals("abba", "abc", "b")),
			`0: "k0"="abba" h:"x" @1767225600000 p3 o100`,
			`2: "k2"="b" h:"x" @1767225600002 p3 o102`)
		_, err := newHost(t).Load(context.Background(), rpGo(t, "regexp_filter"), plugins.Options{Wasm: plugins.WasmOptions{CacheDir: filepath.Join(tmpRoot, "cache")}})
		if err == nil || !strings.Contains(err.Error(), "Missing PATTERN variable") || !errors.Is(err, plugins.ErrTrap) {
			t.Fatalf("without PATTERN: %v", err)
		}
	})
	t.Run("identity", func(t *testing.T) {
		m := load(t, rpGo(t, "identity"), plugins.Options{Pool: 1})
		want(t, "identity", call(t, m, vals("a", "b")),
			`0: "k0"="a" h:"x" @1767225600000 p3 o100`,
			`1: "k1"="b" h:"x" @1767225600001 p3 o101`)
	})
	// validation writes a record of valid JSON to the default output and
	// any other to topic invalid_json: with that output, there; without
	// it, the record is rejected, naming the topic.
	t.Run("validation", func(t *testing.T) {
		m := load(t, rpGo(t, "validation"), plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Outputs: []string{"orders", "invalid_json"}}})
		want(t, "validation to two topics", call(t, m, vals(`{"a":1}`, `{"a":`, `[]`)),
			`0: "k0"="{\"a\":1}" h:"x" @1767225600000 p3 o100`,
			`1: "k1"="{\"a\":" h:"x" @1767225600001 p3 o101 -> invalid_json`,
			`2: "k2"="[]" h:"x" @1767225600002 p3 o102`)
		one := load(t, rpGo(t, "validation"), plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Outputs: []string{"orders"}}})
		want(t, "validation to one topic", call(t, one, vals(`{"a":1}`, `{"a":`)),
			`0: "k0"="{\"a\":1}" h:"x" @1767225600000 p3 o100`,
			`1: error: the transform wrote a record to topic "invalid_json", which is not an output of this stage (its outputs: orders)`)
	})
	t.Run("transcoding", func(t *testing.T) {
		m := load(t, rpGo(t, "transcoding"), plugins.Options{Pool: 1})
		want(t, "transcoding", call(t, m, vals("x,foo,1\ny,bar,2\n")),
			`0: "x"="{\"a\":\"foo\",\"b\":1}" @1767225600000 p3 o100`,
			`0: "y"="{\"a\":\"bar\",\"b\":2}" @1767225600000 p3 o100`)
	})
}

// TestFluvioExamples: the SmartModules of fluvio-smartmodule's README, as
// it documents them: filter keeps the records whose value contains an
// "a" (the record itself, headers and timestamp as they were); map reads
// each value as an i32 and doubles it, and rejects a value that is not
// one with the SmartModule's error (the other records still map); array_map
// makes a record of each element of a JSON array value (with no key); an
// aggregate does not load (streamd has no durable accumulator yet).
func TestFluvioExamples(t *testing.T) {
	t.Run("filter", func(t *testing.T) {
		m := load(t, fluvioSM(t, "filter"), plugins.Options{Pool: 1})
		if got := m.ABI().String(); got != "fluvio smartmodule filter (api 22)" {
			t.Errorf("ABI %q", got)
		}
		want(t, "filter", call(t, m, vals("apple", "kiwi", "banana", "")),
			`0: "k0"="apple" h:"x" @1767225600000 p3 o100`,
			`2: "k2"="banana" h:"x" @1767225600002 p3 o102`)
	})
	t.Run("map", func(t *testing.T) {
		m := load(t, fluvioSM(t, "map"), plugins.Options{Pool: 1})
		res := call(t, m, vals("21", "x", "-4", "2147483647", "5"))
		want(t, "map", res,
			`0: "k0"="42" h:"x" @1767225600000 p3 o100`,
			`1: error: fluvio smartmodule map: invalid digit found in string`,
			`2: "k2"="-8" h:"x" @1767225600002 p3 o102`,
			`3: "k3"="-2" h:"x" @1767225600003 p3 o103`, // a release build wraps

			`4: "k4"="10" h:"x" @1767225600004 p3 o104`)
		var re *runtime.RejectError
		if !errors.As(res[1].Err, &re) || re.Plugin != "map" {
			t.Errorf("the error of record 1 is a %T (%v), want a *runtime.RejectError of plugin map", res[1].Err, res[1].Err)
		}
	})
	t.Run("array_map", func(t *testing.T) {
		m := load(t, fluvioSM(t, "array_map"), plugins.Options{Pool: 1})
		want(t, "array_map", call(t, m, vals(`[1,{"a":"b"},"c"]`, `[]`, `{}`, `["d"]`)),
			`0: null="1" h:"x" @1767225600000 p3 o100`,
			`0: null="{\"a\":\"b\"}" h:"x" @1767225600000 p3 o100`,
			`0: null="\"c\"" h:"x" @1767225600000 p3 o100`,
			`2: error: fluvio smartmodule array_map: invalid type: map, expected a sequence at line 1 column 0`,
			`3: null="\"d\"" h:"x" @1767225600003 p3 o103`)
	})
	t.Run("aggregate", func(t *testing.T) {
		_, err := newHost(t).Load(context.Background(), fluvioSM(t, "aggregate"), plugins.Options{})
		if err == nil || !strings.Contains(err.Error(), "aggregate SmartModule carries its accumulator") {
			t.Fatalf("aggregate: %v", err)
		}
	})
}

// syncBuffer is a bytes.Buffer for concurrent writers (a logger).
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

// TestRedpandaSchemaRegistry: a transform written with Redpanda's Rust
// SDK and its Schema Registry client (examples/wasm/redpanda/json-to-avro)
// registers its schema, reads it back by id and by the subject's latest
// version through streamd's registry client, and writes Avro in the wire
// format; a registry that cannot be reached fails its start as transient
// (to be retried), one that refuses (409) fails it with the registry's
// answer in the error.
func TestRedpandaSchemaRegistry(t *testing.T) {
	path := testenv.ForeignWasm(t, "redpanda/json-to-avro", "plugin")
	f := srfake.New()
	t.Cleanup(f.Close)
	cl, err := sr.NewClient(sr.URLs(f.URL()))
	if err != nil {
		t.Fatal(err)
	}
	opts := plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Outputs: []string{"orders-avro"}, SchemaRegistry: schema.GuestRegistry(cl)}}
	m := load(t, path, opts)
	got, ok := f.GetSchema("orders-avro-value", 1)
	if !ok {
		t.Fatal("the transform registered no schema under orders-avro-value")
	}
	res := call(t, m, vals(`{"id":7,"item":"pen"}`))
	wantValue := append([]byte{0, 0, 0, 0, byte(got.ID)}, 0x0e, 0x06, 'p', 'e', 'n') // id 7: zigzag 14; "pen": length 3, zigzag 6
	if r := res[0].Records; len(r) != 1 || !bytes.Equal(r[0].Value, wantValue) || string(r[0].Key) != "k0" || len(r[0].Headers) != 1 {
		t.Fatalf("output %+v, want value % x", res[0], wantValue)
	}
	if _, err := m.Call(context.Background(), runtime.OpTransform, vals(`{"item":"pen"}`)); !errors.Is(err, plugins.ErrTrap) || !strings.Contains(err.Error(), "id is not an integer") {
		t.Fatalf("an order without an id: %v", err)
	}

	f.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, `{"error_code":50001,"message":"down for maintenance"}`, http.StatusServiceUnavailable)
		return true
	})
	_, err = newHost(t).Load(context.Background(), path, opts)
	if !plugins.IsTransient(err) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a registry that answers 503: %v", err)
	}
	f.ClearInterceptors()
	f.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost {
			return false
		}
		http.Error(w, `{"error_code":409,"message":"incompatible with an earlier schema"}`, http.StatusConflict)
		return true
	})
	_, err = newHost(t).Load(context.Background(), path, opts)
	if err == nil || plugins.IsTransient(err) || !errors.Is(err, plugins.ErrTrap) ||
		!strings.Contains(err.Error(), "the schema registry had refused the transform's request: register a schema under subject \"orders-avro-value\"") ||
		!strings.Contains(err.Error(), "incompatible with an earlier schema") {
		t.Fatalf("a registry that refuses the schema: %v", err)
	}
}

// TestForeignReload: a Redpanda transform's file replaced by a new
// version is swapped in between batches, as a streamd plugin's is (the
// old version's instances, goroutines and all, end), and a Fluvio
// SmartModule can replace it under the same file name; a file that no
// longer loads keeps the running version.
func TestForeignReload(t *testing.T) {
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	path := filepath.Join(t.TempDir(), "orders.wasm")
	replaceFile(t, path, read(rpRust(t, "identity")))
	ctx := context.Background()
	before := goruntime.NumGoroutine()
	w, err := newHost(t).LoadWatched(ctx, path, plugins.Options{Pool: 2, Wasm: plugins.WasmOptions{CacheDir: filepath.Join(tmpRoot, "cache")}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	in := vals("{}", "nope")
	want(t, "identity", call(t, w, in),
		`0: "k0"="{}" h:"x" @1767225600000 p3 o100`,
		`1: "k1"="nope" h:"x" @1767225600001 p3 o101`)
	replaceFile(t, path, read(rpRust(t, "validation_filter")))
	if swapped, err := w.Reload(ctx); !swapped || err != nil {
		t.Fatalf("reload: %v %v", swapped, err)
	}
	want(t, "validation_filter", call(t, w, in),
		`0: "k0"="{}" h:"x" @1767225600000 p3 o100`)
	replaceFile(t, path, read(fluvioSM(t, "filter")))
	if swapped, err := w.Reload(ctx); !swapped || err != nil {
		t.Fatalf("reload to a SmartModule: %v %v", swapped, err)
	}
	if got := w.ABI().String(); got != "fluvio smartmodule filter (api 22)" || w.Manifest().Name != "orders" {
		t.Errorf("after the reload: %s, %+v", got, w.Manifest())
	}
	want(t, "filter", call(t, w, vals("banana", "kiwi")),
		`0: "k0"="banana" h:"x" @1767225600000 p3 o100`)
	replaceFile(t, path, read(fluvioSM(t, "aggregate")))
	if swapped, err := w.Reload(ctx); swapped || err == nil || w.ReloadRefused() == nil {
		t.Fatalf("reload to an aggregate: %v %v", swapped, err)
	}
	want(t, "still the filter", call(t, w, vals("apple")),
		`0: "k0"="apple" h:"x" @1767225600000 p3 o100`)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, before)
}
