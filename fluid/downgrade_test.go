package fluid

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

func rec(v string, value []byte, off int64) record.Record {
	r := record.Record{Topic: "orders", Partition: 1, Offset: off, Key: []byte("k"), Value: value}
	if v != "" {
		r.Headers = []record.Header{{Key: HeaderSchemaVersion, Value: []byte(v)}, {Key: "trace", Value: []byte("t1")}}
	}
	return r
}

func TestToVersion(t *testing.T) {
	m, err := LoadMetadata(writeMetadata(t, 4))
	must(t, err)
	d := newDowngrader(m, goLoader(0), plugins.Options{}, 1)
	defer func() { must(t, d.close(context.Background())) }()
	in := []record.Record{
		rec("3", order(3, 1), 10),
		rec("4", order(4, 2), 11),
		rec("", order(1, 3), 12), // baseline v1: older, copied unchanged
		rec("4", order(4, 4), 13),
		rec("v3", order(3, 5), 14),
	}
	out, err := d.toVersion(context.Background(), "orders", 3, in)
	must(t, err)
	if len(out) != len(in) {
		t.Fatalf("%d outputs for %d inputs", len(out), len(in))
	}
	for i, o := range out {
		sp, so, err := sourcePosition(&o)
		must(t, err)
		if sp != 1 || so != in[i].Offset || o.Partition != 1 || string(o.Key) != "k" {
			t.Errorf("out[%d]: source %d/%d partition %d key %q", i, sp, so, o.Partition, o.Key)
		}
	}
	for _, i := range []int{0, 2, 4} {
		if string(out[i].Value) != string(in[i].Value) {
			t.Errorf("out[%d] changed: %s", i, out[i].Value)
		}
	}
	for _, i := range []int{1, 3} {
		if v, _ := out[i].Header(HeaderSchemaVersion); string(v) != "3" {
			t.Errorf("out[%d] version %q", i, v)
		}
		if v, _ := out[i].Header(HeaderSourceVersion); string(v) != "4" {
			t.Errorf("out[%d] source version %q", i, v)
		}
		if v, _ := out[i].Header("trace"); string(v) != "t1" {
			t.Errorf("out[%d] lost header trace", i)
		}
		tv, _ := m.Topic("orders", 3)
		if err := tv.Validate(out[i].Value); err != nil {
			t.Errorf("out[%d]: %v", i, err)
		}
	}
	// The input batch is not modified.
	if _, ok := in[1].Header(HeaderSourceOffset); ok || string(in[1].Value) != string(order(4, 2)) {
		t.Fatal("input modified")
	}
}

// badTransform returns wrong results in several ways.
type badTransform struct {
	goTransform
	mode string
}

func (b *badTransform) Transform(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	switch b.mode {
	case "batch error":
		return nil, errors.New("trap")
	case "short":
		return nil, nil
	case "record error":
		return []plugins.Result{{Err: errors.New("bad record")}}, nil
	case "two outputs":
		return []plugins.Result{{Records: []record.Record{batch[0], batch[0]}}}, nil
	case "invalid":
		return []plugins.Result{{Records: []record.Record{{Value: []byte(`{"id":"nope"}`)}}}}, nil
	}
	return b.goTransform.Transform(ctx, batch)
}

func TestToVersionFailsClosed(t *testing.T) {
	m, err := LoadMetadata(writeMetadata(t, 4))
	must(t, err)
	for _, mode := range []string{"batch error", "short", "record error", "two outputs", "invalid"} {
		t.Run(mode, func(t *testing.T) {
			load := func(_ context.Context, ref string, _ plugins.Options) (plugins.Plugin, error) {
				return &badTransform{goTransform: goTransform{name: ref, fn: orderDowngrades[4]}, mode: mode}, nil
			}
			d := newDowngrader(m, load, plugins.Options{}, 1)
			defer func() { must(t, d.close(context.Background())) }()
			_, err := d.toVersion(context.Background(), "orders", 3, []record.Record{rec("4", order(4, 1), 5)})
			if err == nil {
				t.Fatal("no error")
			}
		})
	}
	d := newDowngrader(m, goLoader(0), plugins.Options{}, 1)
	for _, tt := range []struct {
		r    record.Record
		want string
	}{
		{rec("9", order(4, 1), 1), "unknown schema version"},
		{rec("x", order(4, 1), 1), "not a schema version"},
		{rec("0", order(4, 1), 1), "not a schema version"},
	} {
		_, err := d.toVersion(context.Background(), "orders", 3, []record.Record{tt.r})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want %q", err, tt.want)
		}
	}
	// A missing step fails closed too.
	d2 := newDowngrader(m, nil, plugins.Options{}, 1)
	if _, err := d2.toVersion(context.Background(), "orders", 3, []record.Record{rec("4", order(4, 1), 1)}); err == nil || !strings.Contains(err.Error(), "no plugin loader") {
		t.Errorf("no loader: %v", err)
	}
}

func FuzzStateApply(f *testing.F) {
	f.Add("g/orders/grp", []byte(`{"version":3}`))
	f.Add("r/orders/3", []byte(`{"observed":4,"start":{"0":12}}`))
	f.Add("p/orders/3", []byte(`{"next":{"1":7}}`))
	f.Add("g/orders/a/b", []byte(nil))
	f.Add("x", []byte(`{}`))
	f.Add("r/orders/zz", []byte(`{"start":{"a":1}}`))
	f.Add("r/orders/3", []byte(`{"observed":4,"start":{"0":12},"stopped":true}`))
	f.Add("s/orders/3/0/1796116800655", []byte(`{"from":7,"offset":40,"group":"late"}`))
	f.Add("s/orders/3/0/5", []byte(nil))
	f.Add("s/orders/3/x/5", []byte(`{}`))
	f.Add("s/orders/3/0", []byte(`{}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		v := newView()
		// Applying twice (a state record read again) must not change the
		// view; a segment key then its tombstone leaves no segment.
		// A key or value the view does not take is refused; either way the
		// checks below must hold.
		_ = v.apply(key, value)
		_ = v.apply(key, value)
		v.groupsOn("orders", 3)
		for tv, ps := range v.segments {
			for p, ss := range ps {
				for i := 1; i < len(ss); i++ {
					if ss[i-1].ID >= ss[i].ID {
						t.Fatalf("segments of %v/%d not sorted by id: %+v", tv, p, ss)
					}
				}
				if len(ss) != 1 {
					t.Fatalf("one segment key applied twice gave %d segments", len(ss))
				}
				v.newest(tv, p)
			}
			v.segmentsFingerprint(tv)
		}
		_ = v.apply(key, nil)
		for tv, ps := range v.segments {
			for p, ss := range ps {
				if len(ss) != 0 {
					t.Fatalf("%v/%d: segment left after its tombstone: %+v", tv, p, ss)
				}
			}
		}
	})
}

func FuzzHeaders(f *testing.F) {
	f.Add([]byte("3"), []byte("0"), []byte("12"))
	f.Add([]byte("v12"), []byte("-1"), []byte("x"))
	f.Add([]byte("+4"), []byte("2147483648"), []byte("9223372036854775808"))
	f.Fuzz(func(t *testing.T, version, part, off []byte) {
		r := record.Record{Headers: []record.Header{{Key: HeaderSchemaVersion, Value: version}, {Key: HeaderSourcePartition, Value: part}, {Key: HeaderSourceOffset, Value: off}}}
		if v, err := recordVersion(&r, 1); err == nil && v < 1 {
			t.Fatalf("version %d accepted from %q", v, version)
		}
		if p, o, err := sourcePosition(&r); err == nil && (p < 0 || o < 0) {
			t.Fatalf("position %d/%d accepted", p, o)
		}
		// The same bytes as HeaderSourceFrom and HeaderSegment.
		r.Headers = append(r.Headers, record.Header{Key: HeaderSourceFrom, Value: part}, record.Header{Key: HeaderSegment, Value: version})
		if p, from, o, seg, err := sourceRange(&r); err == nil && (p < 0 || from < 0 || from > o || seg < 0) {
			t.Fatalf("range %d/[%d,%d] segment %d accepted", p, from, o, seg)
		}
	})
}

// inPlaceTransform sets a header on its input records in place (as a
// plugin may) before downgrading them.
type inPlaceTransform struct{ goTransform }

func (p *inPlaceTransform) Transform(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	for i := range batch {
		batch[i].SetHeader(HeaderSchemaVersion, []byte("3"))
		batch[i].SetHeader("touched", []byte("yes"))
	}
	return p.goTransform.Transform(ctx, batch)
}

// TestToVersionHeaders: the bridge's headers replace any the input or the
// plugin carried, in a fixed order, every output has its own header slice,
// and a plugin that sets headers on its input does not modify the batch.
func TestToVersionHeaders(t *testing.T) {
	m, err := LoadMetadata(writeMetadata(t, 4))
	must(t, err)
	load := func(_ context.Context, ref string, _ plugins.Options) (plugins.Plugin, error) {
		return &inPlaceTransform{goTransform{name: ref, fn: orderDowngrades[4]}}, nil
	}
	d := newDowngrader(m, load, plugins.Options{}, 1)
	defer func() { must(t, d.close(context.Background())) }()
	stale := []record.Header{{Key: HeaderSourceOffset, Value: []byte("999")}, {Key: HeaderSourcePartition, Value: []byte("7")}}
	in := []record.Record{
		rec("4", order(4, 1), 10),
		rec("3", order(3, 2), 11),
		rec("4", order(4, 3), 12345678901),
	}
	in[0].Headers = append(in[0].Headers, stale...)
	in[1].Headers = append(in[1].Headers, stale...)
	before := make([][]record.Header, len(in))
	for i := range in {
		before[i] = append([]record.Header(nil), in[i].Headers...)
	}
	out, err := d.toVersion(context.Background(), "orders", 3, in)
	must(t, err)
	for i := range in {
		if fmt.Sprint(in[i].Headers) != fmt.Sprint(before[i]) {
			t.Errorf("in[%d] headers modified: %v", i, in[i].Headers)
		}
	}
	want := []string{
		`[{trace [116 49]} {touched [121 101 115]} {fluid-schema-version [51]} {fluid-source-partition [49]} {fluid-source-offset [49 48]} {fluid-source-schema-version [52]}]`,
		`[{fluid-schema-version [51]} {trace [116 49]} {fluid-source-partition [49]} {fluid-source-offset [49 49]} {fluid-source-schema-version [51]}]`,
		"",
	}
	for i, o := range out {
		for _, k := range []string{HeaderSchemaVersion, HeaderSourcePartition, HeaderSourceOffset, HeaderSourceVersion} {
			n := 0
			for _, h := range o.Headers {
				if h.Key == k {
					n++
				}
			}
			if n != 1 {
				t.Errorf("out[%d]: %d %s headers", i, n, k)
			}
		}
		if want[i] != "" && fmt.Sprint(o.Headers) != want[i] {
			t.Errorf("out[%d] headers\n got %v\nwant %s", i, o.Headers, want[i])
		}
		if cap(o.Headers) != len(o.Headers) {
			t.Errorf("out[%d]: headers share spare capacity", i)
		}
	}
	if p, off, err := sourcePosition(&out[2]); err != nil || p != 1 || off != 12345678901 {
		t.Errorf("out[2] source %d/%d %v", p, off, err)
	}
	// Setting a header on one output leaves the others alone.
	out[0].SetHeader(HeaderSourceOffset, []byte("x"))
	if _, off, _ := sourcePosition(&out[1]); off != 11 {
		t.Errorf("out[1] offset changed to %d", off)
	}
}
