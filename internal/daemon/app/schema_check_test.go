package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestCheckSchemas: `streamd schema check` resolves each subject a config
// names against Apicurio, registers nothing, and says what is wrong.
func TestCheckSchemas(t *testing.T) {
	u := testenv.SchemaRegistry(t)
	reg := registryClient(t, u)
	p := testenv.Topic(t, "check")
	register(t, reg, p+"-in-value", eventV1)
	register(t, reg, p+"-strict-value", eventV1)
	if r := reg.SetCompatibility(context.Background(), sr.SetCompatibility{Level: sr.CompatBackward}, p+"-strict-value"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "v2.avsc"), eventV2)
	writeFile(t, filepath.Join(dir, "bad.avsc"), eventBad)
	stage := func(mode, extra string) string {
		return fmt.Sprintf("[[pipeline.transform]]\ntype = \"schema\"\nmode = %q\n%s", mode, extra)
	}
	pipe := func(name, topic, stages, sink string) string {
		return fmt.Sprintf("[[pipeline]]\nname = %q\n[pipeline.source]\ntype = \"kafka\"\ntopics = [%q, %q]\ngroup = \"g\"\n%s[pipeline.sink]\ntype = \"kafka\"\ntopic = %q\n",
			name, topic, p+"-nosubject", stages, sink)
	}
	src := fmt.Sprintf("[kafka]\nbrokers = [\"127.0.0.1:1\"]\n[schema_registry]\nurl = %q\n[schema_registry.down]\nurl = \"http://127.0.0.1:1\"\ntimeout = \"1s\"\n", u) +
		pipe("a", p+"-in", stage("decode", "")+stage("encode", "schema_file = \"v2.avsc\"\nauto_register = true\n"), p+"-strict") +
		pipe("b", p+"-in", stage("encode", "schema_file = \"bad.avsc\"\nauto_register = true\n"), p+"-strict") +
		pipe("c", p+"-in", stage("encode", fmt.Sprintf("topic = %q\n", p+"-in")), p+"-out") +
		pipe("d", p+"-in", stage("encode", "schema_file = \"v2.avsc\"\n"), p+"-new") +
		pipe("e", p+"-in", stage("encode", "schema_file = \"v2.avsc\"\nauto_register = true\n"), p+"-new") +
		pipe("f", p+"-in", stage("encode", fmt.Sprintf("registry = \"down\"\ntopic = %q\n", p+"-in")), p+"-out")
	cfg, err := config.Parse(filepath.Join(dir, "c.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	checks := app.CheckSchemas(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var lines []string
	for _, c := range checks {
		l := fmt.Sprintf("%s/%s %s %s: ", c.Pipeline, c.Mode, c.Topic, c.Subject)
		if c.Err != nil {
			l += "FAIL " + c.Err.Error()
		} else {
			l += c.Note
		}
		lines = append(lines, strings.ReplaceAll(l, p, "P"))
	}
	got := strings.Join(lines, "\n")
	t.Logf("\n%s", got)
	for _, want := range []string{
		"a/decode P-in P-in-value: latest version 1 is schema id",
		"a/decode P-nosubject P-nosubject-value: no such subject (fine for decode",
		"a/encode  P-strict-value: schema_file is compatible with the latest version: it will be registered",
		"b/encode  P-strict-value: FAIL subject P-strict-value: schema_file is incompatible with the latest version",
		"c/encode  P-in-value: encodes with schema id",
		"d/encode  P-new-value: FAIL looking the schema up in subject P-new-value: ",
		"e/encode  P-new-value: new subject: schema_file will be registered as its version 1",
		"f/encode  P-in-value: FAIL schema registry: ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	// Nothing was registered.
	if subs, err := reg.Subjects(context.Background()); err == nil {
		for _, s := range subs {
			if strings.HasPrefix(s, p+"-new") {
				t.Errorf("check registered %s", s)
			}
		}
	}
	if vs, err := reg.SubjectVersions(context.Background(), p+"-strict-value"); err != nil || len(vs) != 1 {
		t.Errorf("strict subject versions %v %v", vs, err)
	}
}
