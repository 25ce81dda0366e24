package fluid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// Versions of an orders subject where the registry and the schemas
// disagree: v2 adds a required field to an open v1 (v1 reads v2's data,
// v2 does not read v1's), v3 makes the id a string (nobody reads it).
var openOrderSchemas = map[int]string{
	1: `{"type":"object","required":["id","amount"],"properties":{"id":{"type":"integer"},"amount":{"type":"number"}}}`,
	2: `{"type":"object","required":["id","amount","currency"],"properties":{"id":{"type":"integer"},"amount":{"type":"number"},"currency":{"type":"string"}}}`,
	3: `{"type":"object","required":["id","amount"],"properties":{"id":{"type":"string"},"amount":{"type":"number"}}}`,
}

// subjectMetadata registers openOrderSchemas as versions 1..3 of a new
// subject of the real registry and writes manifests naming it.
func subjectMetadata(t *testing.T, cl *sr.Client) (dir, subject string) {
	t.Helper()
	ctx := context.Background()
	subject = testenv.Topic(t, "fluid-compat") + "-value"
	dir = t.TempDir()
	for v := 1; v <= 3; v++ {
		if _, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: openOrderSchemas[v], Type: sr.TypeJSON}, -1, -1); err != nil {
			t.Fatalf("register v%d: %v", v, err)
		}
		if v == 1 { // register the rest whatever the global rule
			setLevel(t, cl, subject, sr.CompatNone)
		}
		vd := filepath.Join(dir, "v"+strconv.Itoa(v))
		must(t, os.MkdirAll(vd, 0o755))
		dg := ""
		if v > 1 {
			dg = fmt.Sprintf(`,"downgrade":"go:orders-v%d"`, v)
		}
		must(t, os.WriteFile(filepath.Join(vd, ManifestFile), fmt.Appendf(nil, `{"version":%d,"topics":{"orders":{"subject":%q%s}}}`, v, subject, dg), 0o644))
	}
	return dir, subject
}

func setLevel(t *testing.T, cl *sr.Client, subject string, l sr.CompatibilityLevel) {
	t.Helper()
	if r := cl.SetCompatibility(context.Background(), sr.SetCompatibility{Level: l}, subject); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
}

// TestRegistryCompatible: Metadata.RegistryCompatible asks the real
// registry the consumer's question (can version C read records of version
// O) in the direction the subject's level checks: BACKWARD checks C's
// schema against version O, FORWARD O's schema against version C, FULL
// both; NONE has no rule to answer by.
func TestRegistryCompatible(t *testing.T) {
	cl, err := sr.NewClient(sr.URLs(testenv.SchemaRegistry(t)))
	must(t, err)
	dir, subject := subjectMetadata(t, cl)
	ctx := context.Background()
	meta, err := LoadMetadataFrom(dir, RegistrySource(ctx, cl))
	must(t, err)
	if ok, err := meta.Compatible("orders", 2, 1); err != nil || ok {
		t.Fatalf("the schemas of v2 and v1 differ, yet Compatible = %v, %v", ok, err)
	}
	for _, tt := range []struct {
		level          sr.CompatibilityLevel
		want21, want31 bool
		want12         bool // a v2 consumer reading v1 records
	}{
		{sr.CompatBackward, true, false, false},
		{sr.CompatForward, true, false, false},
		{sr.CompatFull, false, false, false},
		{sr.CompatBackwardTransitive, true, false, false},
		{sr.CompatForwardTransitive, true, false, false},
	} {
		setLevel(t, cl, subject, tt.level)
		for _, q := range []struct {
			o, c int
			want bool
		}{{2, 1, tt.want21}, {3, 1, tt.want31}, {1, 2, tt.want12}, {2, 2, true}} {
			ok, err := meta.RegistryCompatible(ctx, cl, "orders", q.o, q.c)
			if err != nil || ok != q.want {
				t.Errorf("%s: records of v%d read by v%d: compatible = %v, %v; want %v", tt.level, q.o, q.c, ok, err, q.want)
			}
		}
	}
	setLevel(t, cl, subject, sr.CompatNone)
	if _, err := meta.RegistryCompatible(ctx, cl, "orders", 2, 1); !errors.Is(err, ErrNoRegistryRule) {
		t.Errorf("level NONE: err = %v, want ErrNoRegistryRule", err)
	}
	files, err := LoadMetadata(writeMetadata(t, 2))
	must(t, err)
	if _, err := files.RegistryCompatible(ctx, cl, "orders", 2, 1); err == nil {
		t.Error("a topic of schema files was asked of the registry")
	}
}

// downRegistry is a Registry that fails every call while down is set.
type downRegistry struct {
	Registry
	down  atomic.Bool
	calls atomic.Int32
}

var errDown = errors.New("registry refused the connection")

func (d *downRegistry) Compatibility(ctx context.Context, subjects ...string) []sr.CompatibilityResult {
	d.calls.Add(1)
	if d.down.Load() {
		return []sr.CompatibilityResult{{Err: errDown}}
	}
	return d.Registry.Compatibility(ctx, subjects...)
}

func (d *downRegistry) CheckCompatibility(ctx context.Context, subject string, version int, s sr.Schema) (sr.CheckCompatibilityResult, error) {
	d.calls.Add(1)
	if d.down.Load() {
		return sr.CheckCompatibilityResult{}, errDown
	}
	return d.Registry.CheckCompatibility(ctx, subject, version, s)
}

// TestBridgeCompatibleFromRegistry: a bridge WithRegistry answers
// /fluid/compatible for a topic whose versions are a subject's by the
// registry's check (v2 is readable by v1 under BACKWARD though the schemas
// differ), answers 503 while the registry is down and remembers answers
// once given; a v1 consumer then reads the v2 records from the main topic
// (no downgrade). Without WithRegistry the same metadata answers from the
// schemas.
func TestBridgeCompatibleFromRegistry(t *testing.T) {
	cl, err := sr.NewClient(sr.URLs(testenv.SchemaRegistry(t)))
	must(t, err)
	dir, subject := subjectMetadata(t, cl)
	setLevel(t, cl, subject, sr.CompatBackward)
	ctx := context.Background()
	meta, err := LoadMetadataFrom(dir, RegistrySource(ctx, cl))
	must(t, err)
	reg := &downRegistry{Registry: cl}
	h := newHarnessMeta(t, 2, meta, WithRegistry(reg))
	ask := func(srv string, o, c int) (int, string) {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("%s/fluid/compatible?topic=%s&observed-schema-version=%d&compatible-schema-version=%d", srv, h.topic, o, c))
		must(t, err)
		defer testenv.Ignore(resp.Body.Close)
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	reg.down.Store(true)
	if code, body := ask(h.srv.URL, 2, 1); code != http.StatusServiceUnavailable {
		t.Fatalf("registry down: %d %s, want 503", code, body)
	}
	reg.down.Store(false)
	if code, body := ask(h.srv.URL, 2, 1); code != 200 || body != "{\"compatible\":true}\n" {
		t.Fatalf("v2 read by v1 under BACKWARD: %d %s", code, body)
	}
	if code, body := ask(h.srv.URL, 3, 1); code != 200 || body != "{\"compatible\":false}\n" {
		t.Fatalf("v3 read by v1: %d %s", code, body)
	}
	reg.down.Store(true)
	n := reg.calls.Load()
	if code, body := ask(h.srv.URL, 2, 1); code != 200 || body != "{\"compatible\":true}\n" || reg.calls.Load() != n {
		t.Fatalf("a remembered answer: %d %s, %d registry calls", code, body, reg.calls.Load()-n)
	}
	reg.down.Store(false)

	// The bridge on the same metadata without the registry compares the
	// schemas.
	b, err := NewBridge(ctx, WithMetadata(h.meta), WithBrokers(h.broker.Seeds...), WithStateTopic(h.state), WithLeaderGroup(h.leader+"-2"))
	must(t, err)
	defer testenv.Close(t, ctx, b)
	if ok, err := b.compatible(ctx, h.topic, 2, 1); err != nil || ok {
		t.Fatalf("without the registry: compatible = %v, %v; want false", ok, err)
	}

	// A v1 consumer reads v2 records as they are, from the main topic.
	c := h.consumer("v1", 1)
	defer testenv.Close(t, context.Background(), c)
	var ids []int
	for i := 0; i < 6; i++ {
		ids = append(ids, i)
	}
	h.produce(2, ids...)
	got := 0
	deadline := time.Now().Add(30 * time.Second)
	for got < len(ids) && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		rs, err := c.Poll(pctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		for _, r := range rs {
			v, err := recordVersion(&r, 1)
			must(t, err)
			if r.Topic != h.topic || v != 2 {
				t.Fatalf("record %s/%d@%d version %d: want the v2 record from %s", r.Topic, r.Partition, r.Offset, v, h.topic)
			}
			got++
		}
		c.Ack(rs)
	}
	if got != len(ids) || c.Downgraded() {
		t.Fatalf("got %d of %d records; downgraded = %v", got, len(ids), c.Downgraded())
	}
}

// TestBridgeCompatibleMixed: versions that are not both versions of one
// subject (v1 a schema file, v2 a subject's) are compared by their schemas,
// not sent to the registry (which could never answer: 503 for good).
func TestBridgeCompatibleMixed(t *testing.T) {
	cl, err := sr.NewClient(sr.URLs(testenv.SchemaRegistry(t)))
	must(t, err)
	dir, subject := subjectMetadata(t, cl)
	setLevel(t, cl, subject, sr.CompatBackward)
	must(t, os.WriteFile(filepath.Join(dir, "v1", "orders.schema.json"), []byte(openOrderSchemas[1]), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "v1", ManifestFile), []byte(`{"version":1,"topics":{"orders":{"schema":"orders.schema.json"}}}`), 0o644))
	ctx := context.Background()
	meta, err := LoadMetadataFrom(dir, RegistrySource(ctx, cl))
	must(t, err)
	reg := &downRegistry{Registry: cl}
	b := &Bridge{meta: meta, cfg: config{registry: reg}, log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	if ok, err := b.compatible(ctx, "orders", 2, 1); err != nil || ok || reg.calls.Load() != 0 {
		t.Fatalf("v2 (subject) read by v1 (file): %v, %v, %d registry calls; want false from the schemas, none", ok, err, reg.calls.Load())
	}
	if ok, err := b.compatible(ctx, "orders", 3, 2); err != nil || ok || reg.calls.Load() == 0 {
		t.Fatalf("v3 read by v2 (one subject): %v, %v, %d registry calls; want the registry's false", ok, err, reg.calls.Load())
	}
}
