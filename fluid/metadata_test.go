package fluid

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadMetadataAndCompatible(t *testing.T) {
	m, err := LoadMetadata(writeMetadata(t, 4))
	if err != nil {
		t.Fatal(err)
	}
	if m.First() != 1 || m.Last() != 4 {
		t.Fatalf("versions %d..%d", m.First(), m.Last())
	}
	tests := []struct {
		topic string
		o, c  int
		want  bool
		err   error
	}{
		{"orders", 3, 3, true, nil},
		{"orders", 4, 3, false, nil},
		{"orders", 4, 2, false, nil},
		{"orders", 2, 1, false, nil},
		{"orders", 1, 2, false, nil},
		{"payments", 4, 1, true, nil},
		{"payments", 1, 4, true, nil},
		{"nope", 1, 1, false, ErrUnknownTopic},
		{"orders", 5, 1, false, ErrUnknownVersion},
		{"orders", 1, 0, false, ErrUnknownVersion},
	}
	for _, tt := range tests {
		got, err := m.Compatible(tt.topic, tt.o, tt.c)
		if !errors.Is(err, tt.err) {
			t.Errorf("Compatible(%s,%d,%d) err=%v want %v", tt.topic, tt.o, tt.c, err, tt.err)
			continue
		}
		if got != tt.want {
			t.Errorf("Compatible(%s,%d,%d)=%v want %v", tt.topic, tt.o, tt.c, got, tt.want)
		}
	}
	if probs := m.Check(context.Background(), goLoader(0)); len(probs) != 0 {
		t.Fatalf("Check: %v", probs)
	}
}

func TestChain(t *testing.T) {
	m, err := LoadMetadata(writeMetadata(t, 4))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := m.Chain("orders", 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].From != 4 || steps[1].From != 3 {
		t.Fatalf("chain 4->2: %+v", steps)
	}
	if steps, err := m.Chain("payments", 4, 1); err != nil || len(steps) != 0 {
		t.Fatalf("payments chain: %v %v", steps, err)
	}
	if _, err := m.Chain("orders", 2, 3); err == nil {
		t.Fatal("upgrade chain accepted")
	}
}

func TestCheckProblems(t *testing.T) {
	dir := writeMetadata(t, 3)
	// v3 loses its downgrade; v2 gains one for the unchanged payments topic.
	edit(t, filepath.Join(dir, "v3", ManifestFile), `"downgrade": "go:orders-v3"`, `"schema": "orders.schema.json"`, 1)
	edit(t, filepath.Join(dir, "v2", ManifestFile), `"schema": "payments.schema.json"`, `"schema": "payments.schema.json", "downgrade": "go:orders-v2"`, 1)
	// v2's orders downgrade points at a plugin the loader does not know.
	edit(t, filepath.Join(dir, "v2", ManifestFile), `"go:orders-v2",
      "schema": "orders`, `"go:nope",
      "schema": "orders`, 1)
	m, err := LoadMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}
	probs := m.Check(context.Background(), goLoader(0))
	var errs, warns []string
	for _, p := range probs {
		if p.Warning {
			warns = append(warns, p.String())
		} else {
			errs = append(errs, p.String())
		}
	}
	if len(errs) != 2 || !strings.Contains(strings.Join(errs, "\n"), `topic "orders": schema changed since v2 but no downgrade`) ||
		!strings.Contains(strings.Join(errs, "\n"), `go:nope: go loader: unknown plugin`) {
		t.Fatalf("errors: %q", errs)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], `"payments": schema unchanged since v1`) {
		t.Fatalf("warnings: %q", warns)
	}
	if _, err := m.Chain("orders", 3, 2); err == nil || !strings.Contains(err.Error(), "has no downgrade") {
		t.Fatalf("chain with missing step: %v", err)
	}
}

func edit(t *testing.T, path, old, new string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	if c := strings.Count(string(b), old); c != n {
		t.Fatalf("%s: %q occurs %d times, want %d:\n%s", path, old, c, n, b)
	}
	must(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(b), old, new)), 0o644))
}

func TestLoadMetadataErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(dir string)
		want  string
	}{
		{"gap", func(d string) { must(t, os.Rename(filepath.Join(d, "v2"), filepath.Join(d, "v5"))) }, "not contiguous"},
		{"bad folder", func(d string) { must(t, os.Mkdir(filepath.Join(d, "vx"), 0o755)) }, `folder "vx"`},
		{"bad schema json", func(d string) {
			must(t, os.WriteFile(filepath.Join(d, "v2", "orders.schema.json"), []byte(`{`), 0o644))
		}, "orders.schema.json: schema is not JSON"},
		{"schema does not compile", func(d string) {
			must(t, os.WriteFile(filepath.Join(d, "v2", "orders.schema.json"), []byte(`{"type":12}`), 0o644))
		}, "does not compile"},
		{"version mismatch", func(d string) { edit(t, filepath.Join(d, "v2", ManifestFile), `"version": 2`, `"version": 3`, 1) }, `"version" is 3 but the folder is v2`},
		{"unknown field", func(d string) { edit(t, filepath.Join(d, "v1", ManifestFile), `"version": 1`, `"versoin": 1`, 1) }, `unknown field "versoin"`},
		{"missing schema file", func(d string) { must(t, os.Remove(filepath.Join(d, "v1", "payments.schema.json"))) }, "topics.payments.schema"},
		{"empty", func(d string) {
			must(t, os.RemoveAll(filepath.Join(d, "v1")))
			must(t, os.RemoveAll(filepath.Join(d, "v2")))
		}, "no version folders"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeMetadata(t, 2)
			tt.setup(dir)
			_, err := LoadMetadata(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestResolveRef(t *testing.T) {
	for in, want := range map[string]string{
		"wasm:x.wasm":  "wasm:/d/x.wasm",
		"wasm:/a.wasm": "wasm:/a.wasm",
		"native:bin":   "native:/d/bin",
		"x.wasm":       "/d/x.wasm",
		"go:orders-v2": "go:orders-v2",
		"":             "",
	} {
		if got := resolveRef("/d", in); got != want {
			t.Errorf("resolveRef(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestValidateFastPath: the schemas of the test and demo metadata get the
// one-pass fast path, and Validate answers exactly as the library alone:
// valid payloads pass, invalid ones get the library's error (also those
// the fast path cannot decide).
func TestValidateFastPath(t *testing.T) {
	m, err := LoadMetadata(writeMetadata(t, 4))
	must(t, err)
	demo, err := LoadMetadata("../examples/fluid/.fluid")
	must(t, err)
	for _, c := range []struct {
		m       *Metadata
		v       int
		payload string
		valid   bool
	}{
		{m, 1, `{"id":1,"amount":2.5}`, true},
		{m, 1, `{"id":1.0,"amount":2.5}`, true}, // undecided by the fast path, valid for the library
		{m, 1, `{"id":"1","amount":2.5}`, false},
		{m, 1, `{"id":1}`, false},
		{m, 1, `{"id":1,"amount":2.5} {}`, false},
		{m, 3, `{"id":1,"total":{"amount":1,"currency":"EUR"}}`, true},
		{m, 3, `{"id":1,"total":{"amount":1}}`, false},
		{m, 4, `{"id":1,"total":{"amount":1,"currency":"EUR"},"status":"paid"}`, true},
		{m, 4, `{"id":1,"total":{"amount":1,"currency":"EUR"},"status":"pai\u0064"}`, true}, // escaped: library decides
		{m, 4, `{"id":1,"total":{"amount":1,"currency":"EUR"},"status":"lost"}`, false},
		{demo, 1, `{"order_id":"o-1","customer_id":"c-1","amount_cents":1250,"currency":"EUR"}`, true},
		{demo, 1, `{"order_id":"o-1","customer_id":"c-1","amount_cents":12.5,"currency":"EUR"}`, false},
		{demo, 2, `{"order_id":"o-1","customer":{"id":"c-1","name":"Ada"},"amount_cents":1250,"currency":"EUR"}`, true},
		{demo, 3, `{"order_id":"o-1","customer":{"id":"c-1"},"total":{"amount_cents":1250,"currency":"EUR"},"status":"paid"}`, true},
	} {
		tv, err := c.m.Topic("orders", c.v)
		must(t, err)
		if tv.fast == nil {
			t.Fatalf("%s v%d: no fast path", tv.SchemaFile, c.v)
		}
		err = tv.Validate([]byte(c.payload))
		slow := tv.validateSlow([]byte(c.payload))
		if (err == nil) != c.valid || (slow == nil) != c.valid {
			t.Errorf("v%d %s: Validate %v, library %v, want valid=%v", c.v, c.payload, err, slow, c.valid)
		} else if err != nil && err.Error() != slow.Error() {
			t.Errorf("v%d %s: error %q, library %q", c.v, c.payload, err, slow)
		}
	}
}
