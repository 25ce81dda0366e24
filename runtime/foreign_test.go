package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/streamd/streamd/internal/testenv"
	"github.com/streamd/streamd/plugins"
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
// without PATTERN; identity copies; transcoding makes a JSON record of each
// "key,a,b" row of a CSV value, keyed by its first column.
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
