package testcli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestPipelineTestsForeign: `streamd test` runs pipelines whose stage is a
// Redpanda data transform (its environment from the stage's config) or a
// Fluvio SmartModule, with the verdicts a pipeline gives them: a record a
// Redpanda transform fails on alone (the SDK panics) goes to the
// dead-letter queue with the panic's message, one a SmartModule rejects
// with its hint.
func TestPipelineTestsForeign(t *testing.T) {
	dir := t.TempDir()
	config := fmt.Sprintf(`[kafka]
brokers = ["127.0.0.1:1"]

[[pipeline]]
name = "regexp"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
path = %q
config = { PATTERN = "^a" }
[pipeline.sink]
type = "kafka"
topic = "out"
[[pipeline.test]]
input = "keys.jsonl"
output = "regexp-out.jsonl"

[[pipeline]]
name = "transcoder"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
name = "csv"
path = %q
[pipeline.sink]
type = "kafka"
topic = "out"
[pipeline.errors]
policy = "dlq"
dlq_topic = "dead"
[[pipeline.test]]
input = "csv.jsonl"
output = "csv-out.jsonl"
dlq = "csv-dlq.jsonl"

[[pipeline]]
name = "map"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
name = "double"
path = %q
[pipeline.sink]
type = "kafka"
topic = "out"
[pipeline.errors]
policy = "dlq"
dlq_topic = "dead"
[[pipeline.test]]
input = "numbers.jsonl"
output = "numbers-out.jsonl"
dlq = "numbers-dlq.jsonl"
`, testenv.ForeignWasm(t, "redpanda/go", "regexp_filter"), testenv.ForeignWasm(t, "redpanda/rust", "transcoder"),
		testenv.ForeignWasm(t, "fluvio", "map"))
	files := map[string]string{
		"streamd.toml": config,
		"keys.jsonl": `{"key":"apple","value":"1","offset":1}
{"key":"kiwi","value":"2","offset":2}
`,
		"regexp-out.jsonl": `{"key":"apple","value":"1"}
`,
		"csv.jsonl": `{"key":"k1","value":"a,b\nx,1\ny,2\n","offset":1}
{"key":"k2","value":"a,b\nz,oops\n","offset":2}
`,
		"csv-out.jsonl": `{"key":"k1","value":"{\"a\":\"x\",\"b\":1}"}
{"key":"k1","value":"{\"a\":\"y\",\"b\":2}"}
`,
		"csv-dlq.jsonl": `{"key":"k2","value":"a,b\nz,oops\n","headers":{"streamd-error":"transforming record failed: CSV deserialize error: record 1 (line: 2, byte: 4): field 1: invalid digit found in string","streamd-stage":"csv","streamd-plugin":"transcoder","streamd-source-topic":"","streamd-source-partition":"0","streamd-source-offset":"2"}}
`,
		"numbers.jsonl": `{"value":"21","offset":1}
{"value":"x","offset":2}
`,
		"numbers-out.jsonl": `{"value":"42"}
`,
		"numbers-dlq.jsonl": `{"value":"x","headers":{"streamd-error":"fluvio smartmodule map: invalid digit found in string","streamd-stage":"double","streamd-plugin":"map","streamd-source-topic":"","streamd-source-partition":"0","streamd-source-offset":"2"}}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var o, e bytes.Buffer
	if code := Main(context.Background(), []string{filepath.Join(dir, "streamd.toml")}, &o, &e); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, o.String(), e.String())
	}
}
