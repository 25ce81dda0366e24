package runcli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lintConfig is a valid config (generate -> drop, no plugin, no broker
// connection) that each case edits.
const lintConfig = `[kafka]
brokers = ["127.0.0.1:1"]
[[pipeline]]
name = "orders"
[pipeline.source]
type = "kafka"
topics = ["orders"]
group = "g"
[pipeline.sink]
type = "kafka"
topic = "orders.v1"
[pipeline.errors]
policy = "stop"
`

// TestLint runs `streamd lint` on bad configs (values out of range, missing files): each
// bad one exits 2 with one FILE:LINE: key: problem (allowed: ...) line,
// quickly and briefly, and the good one exits 0.
func TestLint(t *testing.T) {
	deep := "[pipeline.sink.config]\nx = " + strings.Repeat("{a=", 5000) + "1" + strings.Repeat("}", 5000) + "\n"
	tests := []struct {
		name, old, new string
		want           string // after "FILE:"; empty: lint passes
	}{
		{"good", "", "", ""},
		{"negative retry_initial", `policy = "stop"`, `policy = "stop"` + "\nretry_initial = \"-1s\"",
			`14: pipeline[0].errors.retry_initial: "-1s" is out of range (allowed: "1ms" to "1h")`},
		{"negative retry_max", `policy = "stop"`, `policy = "stop"` + "\nretry_max = \"-1s\"",
			`14: pipeline[0].errors.retry_max: "-1s" is out of range (allowed: "1ms" to "1h")`},
		{"sink topic is the source topic", `topic = "orders.v1"`, `topic = "orders"`,
			`11: pipeline[0].sink.topic: "orders" is also this pipeline's source topic: every record written would be read again, forever (allowed: a topic not in source.topics, or on another cluster)`},
		{"workers = 0", `name = "orders"`, `name = "orders"` + "\nworkers = 0",
			`5: pipeline[0].workers: 0 is out of range (allowed: 1 to 256)`},
		{"max_records = 0", `policy = "stop"`, `policy = "stop"` + "\n[pipeline.batch]\nmax_records = 0",
			`15: pipeline[0].batch.max_records: 0 is out of range (allowed: 1 to 1000000)`},
		{"shutdown_timeout negative", `name = "orders"`, `name = "orders"` + "\nshutdown_timeout = \"-1s\"",
			`5: pipeline[0].shutdown_timeout: "-1s" is out of range (allowed: "0s" (abandon in-flight batches at once) to "1h")`},
		{"partitions = -1", `brokers = ["127.0.0.1:1"]`, `brokers = ["127.0.0.1:1"]` + "\npartitions = -1",
			`3: kafka.partitions: -1 is out of range (allowed: 1 to 10000)`},
		{"partitions = 100000", `brokers = ["127.0.0.1:1"]`, `brokers = ["127.0.0.1:1"]` + "\npartitions = 100000",
			`3: kafka.partitions: 100000 is out of range (allowed: 1 to 10000)`},
		// A grant of a missing host directory is refused
		// before any plugin loads, at its line.
		{"dirs: missing host directory", `[pipeline.sink]`, "[[pipeline.transform]]\ntype = \"wasm\"\npath = \"x.wasm\"\ndirs = { \"/data\" = \"no-such-dir:ro\" }\n[pipeline.sink]",
			`12: pipeline[0].transform[0].dirs: "/data" = "no-such-dir:ro": DIR/no-such-dir does not exist (allowed: an existing directory; a grant is not created)`},
		{"dirs: a file, not a directory", `[pipeline.sink]`, "[[pipeline.transform]]\ntype = \"wasm\"\npath = \"x.wasm\"\ndirs = { \"/data\" = \"streamd.toml\" }\n[pipeline.sink]",
			`12: pipeline[0].transform[0].dirs: "/data" = "streamd.toml": DIR/streamd.toml is not a directory (allowed: an existing directory)`},
		{"5000-deep inline tables", `[pipeline.errors]`, deep + `[pipeline.errors]`,
			`13: nested more than 64 levels deep (allowed: at most 64 levels of tables, arrays and dotted keys)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(lintConfig, tt.old, tt.new, 1)
			if tt.old != "" && src == lintConfig {
				t.Fatalf("%q not in the config", tt.old)
			}
			file := filepath.Join(t.TempDir(), "streamd.toml")
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := Lint(context.Background(), []string{"-c", file}, &stdout, &stderr)
			if tt.want == "" {
				if code != 0 || !strings.Contains(stdout.String(), ": ok (1 pipelines") {
					t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
				}
				return
			}
			want := "streamd lint: invalid config:\n" + file + ":" + strings.ReplaceAll(tt.want, "DIR/", filepath.Dir(file)+"/") + "\n"
			if code != 2 || stderr.String() != want {
				t.Fatalf("exit %d, stderr (%d bytes):\n%.2000s\nwant exit 2 and:\n%s", code, stderr.Len(), stderr.String(), want)
			}
		})
	}
}
