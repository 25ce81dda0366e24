package app_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/pipeline/pipelinetest"
)

// TestSchemaStageWithoutRegistry: `streamd schema check` and `streamd
// test` build a schema stage whose registry does not answer, with no
// service running: each says what is wrong (or builds the stage, which
// asks the registry only for a record), and neither panics on the shared
// registry clients that `streamd run` makes.
func TestSchemaStageWithoutRegistry(t *testing.T) {
	src := `[kafka]
brokers = ["127.0.0.1:1"]
[schema_registry]
url = "http://127.0.0.1:1"
timeout = "1s"
[[pipeline]]
name = "a"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "schema"
mode = "decode"
[pipeline.sink]
type = "kafka"
topic = "out"
`
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "c.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	checks := app.CheckSchemas(context.Background(), cfg, log)
	if len(checks) == 0 || checks[0].Err == nil {
		t.Fatalf("schema check against a registry that does not answer: %+v, want an error", checks)
	}
	tp, err := app.BuildTest(context.Background(), cfg, 0, log, nil, pipelinetest.NewSourceOf(1), &pipelinetest.Sink{}, nil)
	if err != nil {
		t.Logf("BuildTest: %v", err)
		return
	}
	if err := tp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
