package secured_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/cli/journalcli"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestJournalCommand: `streamd journal append` and `read` reach a secured
// cluster with the config's [kafka.tls] and [kafka.sasl] (SASL_SSL,
// SCRAM-SHA-512), as `streamd run` does: the command builds its client
// through the same mapper as the daemon.
func TestJournalCommand(t *testing.T) {
	b := testenv.SecureKafka(t)
	allowTestUsers(t, b)
	topic := testenv.Topic(t, "secured-journal")
	createTopics(t, b, 1, topic)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "streamd.toml")
	src := saslKafka("SCRAM-SHA-512")(b, dir) + "[journal]\nstore = \"sqlite:journal.db\"\n" +
		"[[pipeline]]\nname = \"p\"\n[pipeline.source]\ntype = \"generate\"\n[pipeline.sink]\ntype = \"drop\"\n"
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(events, []byte(`{"seqNr":1,"payload":{"k":"v"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		if code := journalcli.Main(ctx, args, &stdout, &stderr); code != 0 {
			t.Fatalf("streamd journal %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String()
	}
	run("append", "-c", cfg, "--topic", topic, "--id", "x", "--events", events)
	var e struct {
		SeqNr   int64 `json:"seqNr"`
		Payload struct{ K string }
	}
	out := run("read", "-c", cfg, "--topic", topic, "--id", "x")
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &e); err != nil || e.SeqNr != 1 || e.Payload.K != "v" {
		t.Fatalf("journal read: %q (%v), want the event appended", out, err)
	}
}
