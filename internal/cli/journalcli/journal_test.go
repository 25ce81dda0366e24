package journalcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestJournalReadEscaped: `streamd journal read` writes the control
// characters of events (C1, bidirectional controls: JSON lets them in
// strings as they are) as JSON escapes: the same JSON, nothing for the
// terminal to act on; --raw writes them as they are.
func TestJournalReadEscaped(t *testing.T) {
	b := testenv.Kafka(t)
	topic := testenv.Topic(t, "journal")
	b.CreateTopic(t, topic, 1)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "streamd.toml")
	src := fmt.Sprintf("[kafka]\nbrokers = [%q]\n[journal]\nstore = \"sqlite:%s\"\n[[pipeline]]\nname = \"p\"\n[pipeline.source]\ntype = \"generate\"\n[pipeline.sink]\ntype = \"drop\"\n",
		b.Seeds[0], filepath.Join(dir, "journal.db"))
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(dir, "events.jsonl")
	const hostile = "a\x1b[2J\u009b31m\u202eb"
	ev1, _ := json.Marshal(map[string]any{"seqNr": 1, "payloadType": "text", "payload": hostile})
	ev2 := `{"seqNr":2,"payload":{"k":"` + "\u009b31m\u202e" + `"}}`
	if err := os.WriteFile(events, []byte(string(ev1)+"\n"+ev2+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("journal %v: exit %d: %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	run("append", "-c", cfg, "--topic", topic, "--id", "x", "--events", events)
	out := run("read", "-c", cfg, "--topic", topic, "--id", "x")
	for _, c := range []string{"\x1b", "\u009b", "\u202e"} {
		if strings.Contains(out, c) {
			t.Errorf("journal read prints %q:\n%q", c, out)
		}
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var e1 struct{ Payload string }
	var e2 struct{ Payload struct{ K string } }
	if err := dec.Decode(&e1); err != nil || e1.Payload != hostile {
		t.Errorf("event 1: %q, %v", e1.Payload, err)
	}
	if err := dec.Decode(&e2); err != nil || e2.Payload.K != "\u009b31m\u202e" {
		t.Errorf("event 2: %q, %v", e2.Payload.K, err)
	}
	if raw := run("read", "-c", cfg, "--topic", topic, "--id", "x", "--raw"); !strings.Contains(raw, "\u009b31m\u202e") {
		t.Errorf("journal read --raw: %q", raw)
	}
}
