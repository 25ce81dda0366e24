package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestFluidMetadataFromRegistry: with [fluid] on a registry, a manifest
// that names a subject gets its schema versions from the registry's
// versions of that subject (fluid's TestSeedStoryRegistry runs the seed
// story on such metadata).
func TestFluidMetadataFromRegistry(t *testing.T) {
	u := testenv.SchemaRegistry(t)
	reg := registryClient(t, u)
	subject := testenv.Topic(t, "fluid-app") + "-value"
	v1 := `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
	v2 := `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id","n"]}`
	for _, s := range []string{v1, v2} {
		if _, err := reg.RegisterSchema(context.Background(), subject, sr.Schema{Schema: s, Type: sr.TypeJSON}, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	meta := filepath.Join(dir, ".fluid")
	for v := 1; v <= 2; v++ {
		vd := filepath.Join(meta, fmt.Sprintf("v%d", v))
		if err := os.MkdirAll(vd, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(vd, "manifest.json"), fmt.Sprintf(`{"version":%d,"topics":{"orders":{"subject":%q}}}`, v, subject))
	}
	src := fmt.Sprintf("[kafka]\nbrokers = [\"127.0.0.1:1\"]\n[schema_registry]\nurl = %q\n[fluid]\nmetadata = %q\n", u, meta)
	cfg, err := config.Parse(filepath.Join(dir, "c.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Build(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), benchOpen, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), a)
	m, _, err := app.FluidMetadata(a, context.Background(), cfg.Fluid)
	if err != nil {
		t.Fatal(err)
	}
	tv, err := m.Topic("orders", 2)
	if err != nil || tv.SchemaFile != "registry:"+subject+"/versions/2" {
		t.Fatalf("%+v %v", tv, err)
	}
	if err := tv.Validate([]byte(`{"id":"a"}`)); err == nil {
		t.Fatal("v2 (from the registry) accepted a record without n")
	}
	if ok, err := m.Compatible("orders", 2, 1); err != nil || ok {
		t.Fatalf("v2 vs v1 compatible=%v %v", ok, err)
	}
}

// TestCheckSchemasFluid: `streamd schema check` also resolves the subjects
// the [fluid] metadata's manifests name (every version folder's version of
// its subject); a version the subject lacks fails, named.
func TestCheckSchemasFluid(t *testing.T) {
	u := testenv.SchemaRegistry(t)
	reg := registryClient(t, u)
	subject := testenv.Topic(t, "fluid-check") + "-value"
	v1 := `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
	v2 := `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id","n"]}`
	for _, s := range []string{v1, v2} {
		if _, err := reg.RegisterSchema(context.Background(), subject, sr.Schema{Schema: s, Type: sr.TypeJSON}, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	meta := func(name string, n int) string {
		m := filepath.Join(dir, name)
		for v := 1; v <= n; v++ {
			vd := filepath.Join(m, fmt.Sprintf("v%d", v))
			if err := os.MkdirAll(vd, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(vd, "manifest.json"), fmt.Sprintf(`{"version":%d,"topics":{"orders":{"subject":%q},"files":{"schema":"f.json"}}}`, v, subject))
			writeFile(t, filepath.Join(vd, "f.json"), `{"type":"object"}`)
		}
		return m
	}
	for _, tt := range []struct {
		n    int
		want string
	}{
		{2, "orders " + subject + ": fluid versions 1..2 are its versions 1..2 (JSON Schema)"},
		{3, "FAIL fluid metadata " + filepath.Join(dir, "m3", "v3", "manifest.json") + ": topics.orders.subject " + subject + " version 3: "},
	} {
		m := meta(fmt.Sprintf("m%d", tt.n), tt.n)
		src := fmt.Sprintf("[kafka]\nbrokers = [\"127.0.0.1:1\"]\n[schema_registry]\nurl = %q\n[fluid]\nmetadata = %q\n", u, m)
		cfg, err := config.Parse(filepath.Join(dir, "c.toml"), []byte(src), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		checks := app.CheckSchemas(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		var lines []string
		for _, c := range checks {
			l := fmt.Sprintf("%s %s %s: ", c.Mode, c.Topic, c.Subject)
			if c.Err != nil {
				l += "FAIL " + c.Err.Error()
			} else {
				l += c.Note
			}
			lines = append(lines, l)
		}
		got := strings.Join(lines, "\n")
		if len(checks) != 1 || checks[0].Mode != "fluid" || !strings.Contains(got, tt.want) {
			t.Errorf("v1..v%d: got\n%s\nwant one check with %q", tt.n, got, tt.want)
		}
	}
}
