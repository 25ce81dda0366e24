package fluid

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// The test "orders" topic has four versions:
//
//	v1 {id, amount}
//	v2 {id, amount, currency}
//	v3 {id, total: {amount, currency}}
//	v4 {id, total: {amount, currency}, status}
//
// and "payments" that never changes. Downgrades are in-process Go
// transforms named "go:orders-vN".
var orderSchemas = map[int]string{
	1: `{"type":"object","required":["id","amount"],"additionalProperties":false,
		"properties":{"id":{"type":"integer"},"amount":{"type":"number"}}}`,
	2: `{"type":"object","required":["id","amount","currency"],"additionalProperties":false,
		"properties":{"id":{"type":"integer"},"amount":{"type":"number"},"currency":{"type":"string"}}}`,
	3: `{"type":"object","required":["id","total"],"additionalProperties":false,
		"properties":{"id":{"type":"integer"},"total":{"$ref":"#/$defs/money"}},
		"$defs":{"money":{"type":"object","required":["amount","currency"],"additionalProperties":false,
			"properties":{"amount":{"type":"number"},"currency":{"type":"string"}}}}}`,
	4: `{"type":"object","required":["id","total","status"],"additionalProperties":false,
		"properties":{"id":{"type":"integer"},"total":{"$ref":"#/$defs/money"},"status":{"enum":["new","paid"]}},
		"$defs":{"money":{"type":"object","required":["amount","currency"],"additionalProperties":false,
			"properties":{"amount":{"type":"number"},"currency":{"type":"string"}}}}}`,
}

// writeMetadata writes versions 1..n of the test metadata into a new dir.
func writeMetadata(tb testing.TB, n int) string {
	tb.Helper()
	dir := tb.TempDir()
	for v := 1; v <= n; v++ {
		vd := filepath.Join(dir, "v"+strconv.Itoa(v))
		must(tb, os.MkdirAll(vd, 0o755))
		must(tb, os.WriteFile(filepath.Join(vd, "orders.schema.json"), []byte(orderSchemas[v]), 0o644))
		// payments: same schema each version, formatted differently, with a
		// different description (annotation) so normalisation matters.
		ps := fmt.Sprintf(`{"description":"v%d", "properties":{"id":{"type":"integer"}},"title":"payment", "type":"object"}`, v)
		must(tb, os.WriteFile(filepath.Join(vd, "payments.schema.json"), []byte(ps), 0o644))
		topics := map[string]any{
			"payments": map[string]any{"schema": "payments.schema.json"},
		}
		ot := map[string]any{"schema": "orders.schema.json"}
		if v > 1 {
			ot["downgrade"] = "go:orders-v" + strconv.Itoa(v)
		}
		topics["orders"] = ot
		b, _ := json.MarshalIndent(map[string]any{"version": v, "topics": topics}, "", "  ")
		must(tb, os.WriteFile(filepath.Join(vd, ManifestFile), b, 0o644))
	}
	return dir
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// orderDowngrades are the Go downgrade steps, by the version they read.
var orderDowngrades = map[int]func(map[string]any) map[string]any{
	2: func(m map[string]any) map[string]any { delete(m, "currency"); return m },
	3: func(m map[string]any) map[string]any {
		t, _ := m["total"].(map[string]any)
		delete(m, "total")
		m["amount"], m["currency"] = t["amount"], t["currency"]
		return m
	},
	4: func(m map[string]any) map[string]any { delete(m, "status"); return m },
}

// goTransform is an in-process downgrade plugin.
type goTransform struct {
	name   string
	fn     func(map[string]any) map[string]any
	delay  time.Duration // per batch, to slow republishing in tests
	calls  *atomic.Int64
	closed atomic.Bool
}

func (g *goTransform) Manifest() plugins.Manifest {
	return plugins.Manifest{Name: g.name, Kind: plugins.KindTransform, Version: "1", ABI: 1}
}

func (g *goTransform) Close(context.Context) error { g.closed.Store(true); return nil }

func (g *goTransform) Transform(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	if g.calls != nil {
		g.calls.Add(1)
	}
	if g.delay > 0 {
		time.Sleep(g.delay)
	}
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		var m map[string]any
		if err := json.Unmarshal(r.Value, &m); err != nil {
			out[i].Err = err
			continue
		}
		v, err := json.Marshal(g.fn(m))
		if err != nil {
			out[i].Err = err
			continue
		}
		r.Value = v
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

// goLoader loads "go:orders-vN" as in-process transforms.
func goLoader(delay time.Duration) plugins.OpenFunc {
	return func(_ context.Context, ref string, opts plugins.Options) (plugins.Plugin, error) {
		var v int
		if _, err := fmt.Sscanf(ref, "go:orders-v%d", &v); err != nil || orderDowngrades[v] == nil {
			return nil, fmt.Errorf("go loader: unknown plugin %q", ref)
		}
		return &goTransform{name: ref, fn: orderDowngrades[v], delay: delay}, nil
	}
}

// order builds an orders payload of version v.
func order(v, id int) []byte {
	var m map[string]any
	switch v {
	case 1:
		m = map[string]any{"id": id, "amount": float64(id) + 0.5}
	case 2:
		m = map[string]any{"id": id, "amount": float64(id) + 0.5, "currency": "EUR"}
	case 3:
		m = map[string]any{"id": id, "total": map[string]any{"amount": float64(id) + 0.5, "currency": "EUR"}}
	case 4:
		m = map[string]any{"id": id, "total": map[string]any{"amount": float64(id) + 0.5, "currency": "EUR"}, "status": "paid"}
	}
	b, _ := json.Marshal(m)
	return b
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func runShell(cmd string) error {
	out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", cmd, err, out)
	}
	return nil
}
