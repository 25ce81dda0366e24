package opscli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/cli/opscli"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// hostile holds what a producer to a source topic can put in a record to
// act on the terminal of whoever prints it: clear the screen (CSI 2J),
// set the window title (OSC 0 ... BEL), color (a forged line), the
// clipboard (OSC 52), a one-byte CSI (C1, U+009B), and a right-to-left
// override.
const hostile = "a\x1b[2J\x1b]0;PWNED\x07\x1b[31mok\x1b]52;c;ZXZpbA==\x07\u009b31m\u202eb\r\nforged line"

// terminalBytes are the bytes that must not reach a terminal from a
// record: ESC, BEL, CR, C1 CSI (UTF-8 C2 9B), RLO (E2 80 AE).
var terminalBytes = []string{"\x1b", "\x07", "\r", "\u009b", "\u202e"}

// TestDLQPrintsEscaped: `streamd dlq ls` and `show` (and --json) print a
// dead letter's key, value, headers and error with every control
// character escaped visibly (\x1b); --raw writes the value's bytes as
// they are.
func TestDLQPrintsEscaped(t *testing.T) {
	b := testenv.Kafka(t)
	src, dlqTopic := testenv.Topic(t, "src"), testenv.Topic(t, "dlq")
	b.CreateTopic(t, src, 1)
	b.CreateTopic(t, dlqTopic, 1)
	in := record.Record{Topic: src, Offset: 7, Key: []byte("k" + hostile), Value: []byte("v" + hostile),
		Headers: []record.Header{{Key: "h" + hostile, Value: []byte("hv" + hostile)}}}
	d := pipeline.DeadLetter(in, "stage"+hostile, "plug", errors.New("rejected: "+hostile))
	kr := &kgo.Record{Topic: dlqTopic, Key: d.Key, Value: d.Value}
	for _, h := range d.Headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if err := b.Client(t).ProduceSync(context.Background(), kr).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "streamd.toml")
	body := fmt.Sprintf("[kafka]\nbrokers = [%q]\n[[pipeline]]\nname = \"p\"\n[pipeline.source]\ntype = \"kafka\"\ntopics = [%q]\ngroup = \"g\"\n"+
		"[pipeline.sink]\ntype = \"drop\"\n[pipeline.errors]\npolicy = \"dlq\"\ndlq_topic = %q\n", b.Seeds[0], src, dlqTopic)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if code := opscli.DLQ(ctx, args, &out, &errb); code != 0 {
			t.Fatalf("dlq %v: exit %d\n%s", args, code, errb.String())
		}
		return out.String()
	}
	for _, args := range [][]string{
		{"ls", "-c", cfg, "p"},
		{"show", "-c", cfg, "p", "0@0"},
		{"ls", "-c", cfg, "p", "--json"},
		{"show", "-c", cfg, "p", "0@0", "--json"},
	} {
		out := run(args...)
		for _, c := range terminalBytes {
			if strings.Contains(out, c) {
				t.Errorf("dlq %s prints %q to the terminal:\n%q", strings.Join(args, " "), c, out)
			}
		}
		if strings.Contains(out, "\nforged line") {
			t.Errorf("dlq %s: a record's newline starts a line of the output:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(args[len(args)-1], "json") && !strings.Contains(out, `\x1b[2J`) {
			t.Errorf("dlq %s does not show the escape as \\x1b:\n%s", strings.Join(args, " "), out)
		}
	}
	if out := run("show", "-c", cfg, "p", "0@0", "--raw"); out != "v"+hostile {
		t.Errorf("dlq show --raw: %q, want the value's bytes %q", out, "v"+hostile)
	}
}
