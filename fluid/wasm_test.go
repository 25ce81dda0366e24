package fluid

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
	"github.com/streamd/streamd/record"
)

// buildWasm builds a Go Wasm plugin package into dir.
func buildWasm(t *testing.T, pkg, out string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	cmd := exec.Command(goTool, "build", "-buildmode=c-shared", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
}

// demoMetadata copies examples/fluid/.fluid with the downgrades pointing at
// freshly built Wasm modules.
func demoMetadata(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	v3to2 := filepath.Join(dir, "v3-v2.wasm")
	v2to1 := filepath.Join(dir, "v2-v1.wasm")
	buildWasm(t, "../examples/fluid/downgrade-v3", v3to2)
	buildWasm(t, "../examples/wasm/go/orders-downgrade", v2to1)
	src := "../examples/fluid/.fluid"
	for _, v := range []string{"v1", "v2", "v3"} {
		must(t, os.MkdirAll(filepath.Join(dir, "meta", v), 0o755))
		for _, f := range []string{ManifestFile, "orders.schema.json"} {
			b, err := os.ReadFile(filepath.Join(src, v, f))
			must(t, err)
			s := strings.Replace(string(b), "wasm:../../../wasm/go/orders-downgrade/plugin.wasm", "wasm:"+v2to1, 1)
			s = strings.Replace(s, "wasm:../../downgrade-v3/plugin.wasm", "wasm:"+v3to2, 1)
			must(t, os.WriteFile(filepath.Join(dir, "meta", v, f), []byte(s), 0o644))
		}
	}
	return filepath.Join(dir, "meta")
}

func wasmLoader(ctx context.Context, ref string, opts plugins.Options) (plugins.Plugin, error) {
	return wasm.Open(ctx, strings.TrimPrefix(ref, "wasm:"), opts)
}

// TestWasmChain runs the demo's downgrades, real Wasm modules built with
// the Go SDK, through the chain v3 -> v2 -> v1.
func TestWasmChain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	m, err := LoadMetadata(demoMetadata(t))
	must(t, err)
	if probs := m.Check(context.Background(), wasmLoader); len(probs) != 0 {
		t.Fatalf("check: %v", probs)
	}
	d := newDowngrader(m, wasmLoader, plugins.Options{}, 1)
	defer func() { must(t, d.close(context.Background())) }()
	in := []record.Record{
		{Topic: "orders", Offset: 1, Value: []byte(`{"order_id":"o-1","customer":{"id":"c-1","name":"Ada"},"total":{"amount_cents":1250,"currency":"EUR"},"status":"paid"}`),
			Headers: []record.Header{{Key: HeaderSchemaVersion, Value: []byte("3")}}},
		{Topic: "orders", Offset: 2, Value: []byte(`{"order_id":"o-2","customer":{"id":"c-2"},"amount_cents":-7,"currency":"USD"}`),
			Headers: []record.Header{{Key: HeaderSchemaVersion, Value: []byte("2")}}},
		{Topic: "orders", Offset: 3, Value: []byte(`{"order_id":"o-3","customer_id":"c-3","amount_cents":1,"currency":"GBP"}`)},
	}
	out, err := d.toVersion(context.Background(), "orders", 1, in)
	must(t, err)
	want := []string{
		`{"order_id":"o-1","customer_id":"c-1","amount_cents":1250,"currency":"EUR"}`,
		`{"order_id":"o-2","customer_id":"c-2","amount_cents":-7,"currency":"USD"}`,
		`{"order_id":"o-3","customer_id":"c-3","amount_cents":1,"currency":"GBP"}`,
	}
	for i, o := range out {
		var a, b any
		must(t, json.Unmarshal(o.Value, &a))
		must(t, json.Unmarshal([]byte(want[i]), &b))
		if string(mustJSON(a)) != string(mustJSON(b)) {
			t.Errorf("out[%d] = %s, want %s", i, o.Value, want[i])
		}
		if i < 2 {
			if v, _ := o.Header(HeaderSchemaVersion); string(v) != "1" {
				t.Errorf("out[%d] version header %q", i, v)
			}
		}
	}
	// A v3 record the v3 -> v2 plugin rejects fails the batch (fail closed).
	bad := []record.Record{{Topic: "orders", Value: []byte(`{"order_id":"o-1","customer":{"id":"c"},"status":"paid"}`),
		Headers: []record.Header{{Key: HeaderSchemaVersion, Value: []byte("3")}}}}
	if _, err := d.toVersion(context.Background(), "orders", 1, bad); err == nil {
		t.Fatal("invalid v3 record downgraded")
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
