package fluid

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// registryMetadata registers the orders schemas of writeMetadata's versions
// 1..n, in order, as versions 1..n of a subject of the real Schema Registry,
// and writes manifests that name the subject instead of schema files (the
// downgrades stay in the manifests).
func registryMetadata(t *testing.T, n int) (dir string, src SchemaSource) {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(testenv.SchemaRegistry(t)))
	must(t, err)
	subject := testenv.Topic(t, "fluid-orders") + "-value"
	ctx := context.Background()
	dir = writeMetadata(t, n)
	for v := 1; v <= n; v++ {
		if _, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: orderSchemas[v], Type: sr.TypeJSON}, -1, -1); err != nil {
			t.Fatalf("register v%d: %v", v, err)
		}
		if v == 1 {
			// Versions must follow each other whatever the registry's
			// global rule: these schemas change incompatibly on purpose.
			// (Apicurio sets a subject's rule only once it exists.)
			if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, subject); r[0].Err != nil {
				t.Fatal(r[0].Err)
			}
		}
		vd := filepath.Join(dir, "v"+strconv.Itoa(v))
		must(t, os.Remove(filepath.Join(vd, "orders.schema.json")))
		b, err := os.ReadFile(filepath.Join(vd, ManifestFile))
		must(t, err)
		var mf map[string]any
		must(t, json.Unmarshal(b, &mf))
		ot := mf["topics"].(map[string]any)["orders"].(map[string]any)
		delete(ot, "schema")
		ot["subject"] = subject
		b, _ = json.MarshalIndent(mf, "", "  ")
		must(t, os.WriteFile(filepath.Join(vd, ManifestFile), b, 0o644))
	}
	if vs, err := cl.SubjectVersions(ctx, subject); err != nil || len(vs) != n {
		t.Fatalf("subject %s has versions %v (%v), want 1..%d", subject, vs, err, n)
	}
	return dir, func(subject string, version int) (string, error) {
		ss, err := cl.SchemaByVersion(ctx, subject, version)
		return ss.Schema.Schema, err
	}
}

// TestSeedStoryRegistry: the seed story (a v3
// consumer while the publisher moves to v4, a restart, an upgrade) with the
// topic's schema versions taken from a Schema Registry subject (schema
// version = registry version) instead of files.
func TestSeedStoryRegistry(t *testing.T) {
	dir, src := registryMetadata(t, 4)
	meta, err := LoadMetadataFrom(dir, src)
	must(t, err)
	if _, err := LoadMetadata(dir); err == nil {
		t.Fatal("a manifest naming a subject loaded without a registry")
	}
	files, err := LoadMetadata(writeMetadata(t, 4))
	must(t, err)
	for v := 1; v <= 4; v++ {
		a, _ := meta.Topic("orders", v)
		b, _ := files.Topic("orders", v)
		if string(a.Normalized) != string(b.Normalized) || a.epoch != b.epoch {
			t.Fatalf("v%d from the registry differs from the file: %s vs %s", v, a.Normalized, b.Normalized)
		}
	}
	seedStory(t, newHarnessMeta(t, 2, meta))
}
