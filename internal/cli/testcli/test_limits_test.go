package testcli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// limitsTestConfig: an identity stage before a Kafka sink whose
// max_record_bytes is 4096, and its dead-letter queue.
const limitsTestConfig = `[kafka]
brokers = ["127.0.0.1:1"]

[[pipeline]]
name = "limits"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
name = "id"
path = "identity.wasm"
[pipeline.sink]
type = "kafka"
topic = "out"
max_record_bytes = 4096
[pipeline.errors]
policy = "dlq"
dlq_topic = "dead"
[[pipeline.test]]
input = "in.jsonl"
output = "out.jsonl"
dlq = "dlq.jsonl"
`

// TestPipelineTestRecordLimits: `streamd test` refuses a record the
// pipeline's Kafka sink would refuse (over sink.max_record_bytes), as the
// sink does: to the error policy with the sink's error, and its dead
// letter, too large for the dead-letter topic (the same limit), without
// its value.
func TestPipelineTestRecordLimits(t *testing.T) {
	dir := t.TempDir()
	testenv.Wat2Wasm(t, "../../../examples/wasm/wat/identity.wat", filepath.Join(dir, "identity.wasm"))
	big := strings.Repeat("x", 6000)
	for name, text := range map[string]string{
		"streamd.toml": limitsTestConfig,
		"in.jsonl":     `{"value":"small","offset":1}` + "\n" + `{"value":"` + big + `","offset":2}` + "\n",
		"out.jsonl":    "",
		"dlq.jsonl":    "",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var o, e bytes.Buffer
	if code := Main(context.Background(), []string{"--update", filepath.Join(dir, "streamd.toml")}, &o, &e); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, o.String(), e.String())
	}
	out, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	dlq, _ := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
	if want := `{"value":"small","partition":0,"offset":1}` + "\n"; string(out) != want {
		t.Errorf("output:\n%.300s\nwant:\n%s", out, want)
	}
	for _, want := range []string{
		`"streamd-error":"record too large: 6000 bytes (key, value and headers), over the sink's max_record_bytes of 4096"`,
		`"streamd-error-kind":"rejected"`, `"streamd-stage":"sink"`, `"streamd-source-offset":"2"`,
		`"streamd-value-bytes":"6000","streamd-truncated":"value"`,
	} {
		if !bytes.Contains(dlq, []byte(want)) {
			t.Errorf("dead letters:\n%.500s\nwant %s in them", dlq, want)
		}
	}
	if !strings.Contains(o.String(), "2 records in, 1 out, 1 rejected (1 to the dead-letter queue") {
		t.Errorf("summary: %s", o.String())
	}
}
