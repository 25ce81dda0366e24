package config

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/plugins"
)

// pipe returns a config with one generate -> drop pipeline named "p" and
// the given TOML inserted at the end of the [[pipeline]] table, of
// [pipeline.source], of [pipeline.sink] and of the file.
func pipe(top, source, sink, tail string) string {
	return `[kafka]
brokers = ["b:1"]
[[pipeline]]
name = "p"
` + top + `
[pipeline.source]
type = "generate"
` + source + `
[pipeline.sink]
type = "drop"
` + sink + `
` + tail
}

// kpipe is pipe with a kafka source reading "in" and a kafka sink writing "out".
func kpipe(top, source, sink, tail string) string {
	return strings.Replace(strings.Replace(pipe(top, `topics = ["in"]
group = "g"
`+source, `topic = "out"
`+sink, tail), `type = "generate"`, `type = "kafka"`, 1), `type = "drop"`, `type = "kafka"`, 1)
}

// kafkaKey adds a line to the [kafka] table of a config made by pipe.
func kafkaKey(src, line string) string {
	return strings.Replace(src, `brokers = ["b:1"]`, `brokers = ["b:1"]`+"\n"+line, 1)
}

// lineOf is the 1-based line of the first line of src containing s.
func lineOf(t *testing.T, src, s string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in source:\n%s", s, src)
	return 0
}

var colRE = regexp.MustCompile(`^(c\.toml:\d+):\d+: `)

// TestRefused: every value out of its range is one error at FILE:LINE
// naming the key and the allowed range.
func TestRefused(t *testing.T) {
	tests := []struct {
		name string
		src  string
		at   string // the error's line is the first line containing at
		want string // the error after "c.toml:LINE: "
	}{
		// Negative backoffs made a busy loop (a core, ~9,000 log lines/s).
		{"retry_initial negative", pipe("", "", "", "[pipeline.errors]\nretry_initial = \"-1s\""), "retry_initial",
			`pipeline[0].errors.retry_initial: "-1s" is out of range (allowed: "1ms" to "1h")`},
		{"retry_max negative", pipe("", "", "", "[pipeline.errors]\nretry_max = \"-5ms\""), "retry_max",
			`pipeline[0].errors.retry_max: "-5ms" is out of range (allowed: "1ms" to "1h")`},
		{"retry_initial zero", pipe("", "", "", "[pipeline.errors]\nretry_initial = \"0s\""), "retry_initial",
			`pipeline[0].errors.retry_initial: "0s" is out of range (allowed: "1ms" to "1h")`},
		{"retry_max below retry_initial", pipe("", "", "", "[pipeline.errors]\nretry_initial = \"2s\"\nretry_max = \"1s\""), "retry_max",
			`pipeline[0].errors.retry_max: "1s" is below retry_initial "2s" (allowed: "2s" to "1h")`},
		{"retry_attempts negative", pipe("", "", "", "[pipeline.errors]\nretry_attempts = -1"), "retry_attempts",
			`pipeline[0].errors.retry_attempts: -1 is out of range (allowed: 0 (retry until shutdown) to 1000000)`},

		// [[pipeline.test]] (streamd test).
		{"test without input", pipe("", "", "", "[[pipeline.test]]\nname = \"t\""), "[[pipeline.test]]",
			`pipeline[0].test[0].input: required key is missing (a JSON-lines file of source records)`},
		{"test dlq with policy stop", pipe("", "", "", "[[pipeline.test]]\ninput = \"i\"\ndlq = \"d\""), "dlq =",
			`pipeline[0].test[0].dlq: the pipeline's error policy is "stop": nothing goes to a dead-letter queue (allowed: with policy = "dlq")`},
		{"two tests of one name", pipe("", "", "", "[[pipeline.test]]\ninput = \"i\"\n[[pipeline.test]]\ninput = \"i\"\nname = \"test-1\""), `name = "test-1"`,
			`pipeline[0].test[1].name: test "test-1" is defined twice`},

		// A sink or dead-letter topic that is also a source topic loops forever.
		{"sink topic is the source topic", strings.Replace(kpipe("", "", "", ""), `topic = "out"`, `topic = "in"`, 1), `topic = "in"`,
			`pipeline[0].sink.topic: "in" is also this pipeline's source topic: every record written would be read again, forever (allowed: a topic not in source.topics, or on another cluster)`},
		{"dlq topic is the source topic", kpipe("", "", "", "[pipeline.errors]\npolicy = \"dlq\"\ndlq_topic = \"in\""), "dlq_topic",
			`pipeline[0].errors.dlq_topic: "in" is also this pipeline's source topic: every record dead-lettered would be read again, forever (allowed: a topic not in source.topics, or on another cluster)`},
		{"two pipelines in a loop", kpipe("", "", "", `
[[pipeline]]
name = "back"
[pipeline.source]
type = "kafka"
topics = ["out"]
group = "g2"
[pipeline.sink]
type = "kafka"
topic = "in"
`), `topic = "in"`,
			`pipeline[1].sink.topic: "in" closes a loop of topics (in -> p -> out -> back -> in): every record would go round forever (allowed: topics that do not lead back to a source)`},

		// Explicit zeros were silently replaced by defaults.
		{"workers zero", pipe("workers = 0", "", "", ""), "workers",
			`pipeline[0].workers: 0 is out of range (allowed: 1 to 256)`},
		{"workers negative", pipe("workers = -3", "", "", ""), "workers",
			`pipeline[0].workers: -3 is out of range (allowed: 1 to 256)`},
		{"workers absurd", pipe("workers = 100000", "", "", ""), "workers",
			`pipeline[0].workers: 100000 is out of range (allowed: 1 to 256)`},
		{"max_records zero", pipe("", "", "", "[pipeline.batch]\nmax_records = 0"), "max_records",
			`pipeline[0].batch.max_records: 0 is out of range (allowed: 1 to 1000000)`},
		{"max_records in an inline table", pipe("batch = { max_records = -1 }", "", "", ""), "batch =",
			`pipeline[0].batch.max_records: -1 is out of range (allowed: 1 to 1000000)`},
		{"max_bytes zero", pipe("", "", "", "[pipeline.batch]\nmax_bytes = 0"), "max_bytes",
			`pipeline[0].batch.max_bytes: 0 is out of range (allowed: 1 to 1073741824)`},
		{"linger negative", pipe("", "", "", "[pipeline.batch]\nlinger = \"-1ms\""), "linger",
			`pipeline[0].batch.linger: "-1ms" is out of range (allowed: "0s" (write at once) to "1h")`},
		{"max_in_flight zero", pipe("max_in_flight = 0", "", "", ""), "max_in_flight",
			`pipeline[0].max_in_flight: 0 is out of range (allowed: 1 to 10000000)`},
		{"max_in_flight absurd", pipe("max_in_flight = 1000000000", "", "", ""), "max_in_flight",
			`pipeline[0].max_in_flight: 1000000000 is out of range (allowed: 1 to 10000000)`},
		{"max_in_flight below max_records", pipe("max_in_flight = 100", "", "", "[pipeline.batch]\nmax_records = 200"), "max_in_flight",
			`pipeline[0].max_in_flight: 100 is below batch.max_records 200 (allowed: 200 to 10000000)`},
		{"shutdown_timeout negative", pipe(`shutdown_timeout = "-1s"`, "", "", ""), "shutdown_timeout",
			`pipeline[0].shutdown_timeout: "-1s" is out of range (allowed: "0s" (abandon in-flight batches at once) to "1h")`},
		{"shutdown_timeout absurd", pipe(`shutdown_timeout = "1000h"`, "", "", ""), "shutdown_timeout",
			`pipeline[0].shutdown_timeout: "1000h" is out of range (allowed: "0s" (abandon in-flight batches at once) to "1h")`},
		{"commit_interval negative", pipe(`commit_interval = "-1s"`, "", "", ""), "commit_interval",
			`pipeline[0].commit_interval: "-1s" is out of range (allowed: "0s" (after every batch) to "1h")`},

		// kafka.partitions.
		{"partitions negative", kafkaKey(pipe("", "", "", ""), "partitions = -1"), "partitions",
			`kafka.partitions: -1 is out of range (allowed: 1 to 10000)`},
		{"partitions zero", kafkaKey(pipe("", "", "", ""), "partitions = 0"), "partitions",
			`kafka.partitions: 0 is out of range (allowed: 1 to 10000)`},
		{"partitions absurd", kafkaKey(pipe("", "", "", ""), "partitions = 100000"), "partitions",
			`kafka.partitions: 100000 is out of range (allowed: 1 to 10000)`},

		// Sources.
		{"session_timeout zero", kpipe("", `session_timeout = "0s"`, "", ""), "session_timeout",
			`pipeline[0].source.session_timeout: "0s" is out of range (allowed: "6s" to "30m")`},
		{"session_timeout negative", kpipe("", `session_timeout = "-45s"`, "", ""), "session_timeout",
			`pipeline[0].source.session_timeout: "-45s" is out of range (allowed: "6s" to "30m")`},
		{"rate negative", pipe("", "rate = -1.5", "", ""), "rate =",
			`pipeline[0].source.rate: -1.5 is out of range (allowed: 0 (as fast as possible) to 10000000)`},
		{"rate nan", pipe("", "rate = nan", "", ""), "rate =",
			`pipeline[0].source.rate: NaN is out of range (allowed: 0 (as fast as possible) to 10000000)`},
		{"rate inf", pipe("", "rate = inf", "", ""), "rate =",
			`pipeline[0].source.rate: +Inf is out of range (allowed: 0 (as fast as possible) to 10000000)`},
		{"count negative", pipe("", "count = -1", "", ""), "count",
			`pipeline[0].source.count: -1 is out of range (allowed: 0 (unbounded) or more)`},
		{"keys zero", pipe("", "keys = 0", "", ""), "keys",
			`pipeline[0].source.keys: 0 is out of range (allowed: 1 to 1000000000)`},
		{"fluid compatible_version zero", kpipe("", "[pipeline.source.fluid]\ncompatible_version = 0", "", ""), "compatible_version",
			`pipeline[0].source.fluid.compatible_version: 0 is out of range (allowed: 1 to 1000000)`},

		// Plugins.
		{"plugins max_memory_pages zero", pipe("", "", "", "[plugins]\nmax_memory_pages = 0"), "max_memory_pages",
			`plugins.max_memory_pages: 0 is out of range (allowed: 1 to 65536)`},
		{"plugins max_memory_pages absurd", pipe("", "", "", "[plugins]\nmax_memory_pages = 70000"), "max_memory_pages",
			`plugins.max_memory_pages: 70000 is out of range (allowed: 1 to 65536)`},
		{"plugins max_memory_pages negative", pipe("", "", "", "[plugins]\nmax_memory_pages = -1"), "max_memory_pages",
			`plugins.max_memory_pages: -1 is out of range (allowed: 1 to 65536)`},
		{"plugins max_table_elements zero", pipe("", "", "", "[plugins]\nmax_table_elements = 0"), "max_table_elements",
			`plugins.max_table_elements: 0 is out of range (allowed: 1 to 268435456)`},
		{"plugins max_table_elements over uint32", pipe("", "", "", "[plugins]\nmax_table_elements = 5000000000"), "max_table_elements",
			`plugins.max_table_elements: 5000000000 is out of range (allowed: 1 to 268435456)`},
		{"plugins max_module_bytes small", pipe("", "", "", "[plugins]\nmax_module_bytes = 100"), "max_module_bytes",
			`plugins.max_module_bytes: 100 is out of range (allowed: 1024 to 1073741824)`},
		{"plugins compile_timeout zero", pipe("", "", "", "[plugins]\ncompile_timeout = \"0s\""), "compile_timeout",
			`plugins.compile_timeout: "0s" is out of range (allowed: "100ms" to "1h")`},
		{"plugins max_log_line_bytes zero", pipe("", "", "", "[plugins]\nmax_log_line_bytes = 0"), "max_log_line_bytes",
			`plugins.max_log_line_bytes: 0 is out of range (allowed: 16 to 1048576)`},
		{"plugins max_log_lines_per_record negative", pipe("", "", "", "[plugins]\nmax_log_lines_per_record = -3"), "max_log_lines_per_record",
			`plugins.max_log_lines_per_record: -3 is out of range (allowed: 1 to 1048576)`},
		{"plugins max_log_bytes_per_record huge", pipe("", "", "", "[plugins]\nmax_log_bytes_per_record = 999999999"), "max_log_bytes_per_record",
			`plugins.max_log_bytes_per_record: 999999999 is out of range (allowed: 16 to 67108864)`},
		{"stage max_table_elements zero", pipe("", "", "", "[[pipeline.transform]]\ntype = \"wasm\"\npath = \"x.wasm\"\nmax_table_elements = 0"), "max_table_elements",
			`pipeline[0].transform[0].max_table_elements: 0 is out of range (allowed: 1 to 268435456)`},
		{"partitions over int32", kafkaKey(pipe("", "", "", ""), "partitions = 3000000000"), "partitions",
			`kafka.partitions: 3000000000 is out of range (allowed: 1 to 10000)`},
		{"plugins timeout zero", pipe("", "", "", "[plugins]\ntimeout = \"0s\""), "timeout",
			`plugins.timeout: "0s" is out of range (allowed: "1ms" to "1h", or negative for no bound)`},
		{"plugins timeout absurd", pipe("", "", "", "[plugins]\ntimeout = \"2h\""), "timeout",
			`plugins.timeout: "2h" is out of range (allowed: "1ms" to "1h", or negative for no bound)`},
		{"plugins watch negative", pipe("", "", "", "[plugins]\nwatch = \"-1s\""), "watch",
			`plugins.watch: "-1s" is out of range (allowed: "0s" (off) or "100ms" to "1h")`},
		{"plugins watch too often", pipe("", "", "", "[plugins]\nwatch = \"1ms\""), "watch",
			`plugins.watch: "1ms" is out of range (allowed: "0s" (off) or "100ms" to "1h")`},
		{"stage pool zero", pipe("", "", "", "[[pipeline.transform]]\ntype = \"wasm\"\npath = \"x.wasm\"\npool = 0"), "pool",
			`pipeline[0].transform[0].pool: 0 is out of range (allowed: 1 to 256)`},
		{"stage max_memory_pages zero", pipe("", "", "", "[[pipeline.transform]]\ntype = \"wasm\"\npath = \"x.wasm\"\nmax_memory_pages = 0"), "max_memory_pages",
			`pipeline[0].transform[0].max_memory_pages: 0 is out of range (allowed: 1 to 65536)`},
		{"stage timeout zero", pipe("", "", "", "[[pipeline.transform]]\ntype = \"wasm\"\npath = \"x.wasm\"\ntimeout = \"0s\""), "timeout",
			`pipeline[0].transform[0].timeout: "0s" is out of range (allowed: "1ms" to "1h", or negative for no bound)`},
		{"sink pool negative", strings.Replace(pipe("", "", "plugin = \"s.wasm\"\npool = -2", ""), `type = "drop"`, `type = "wasm"`, 1), "pool",
			`pipeline[0].sink.pool: -2 is out of range (allowed: 1 to 256)`},
		{"codec stage level", pipe("", "", "", "[[pipeline.transform]]\ntype = \"codec\"\ncodec = \"zstd\"\nmode = \"encode\"\nlevel = 50"), "level",
			`pipeline[0].transform[0].level: 50 is out of range (allowed: 1 to 22 for zstd, or 0 for its default)`},
		{"codec stage unknown codec", pipe("", "", "", "[[pipeline.transform]]\ntype = \"codec\"\ncodec = \"brotli\"\nmode = \"encode\""), "brotli",
			`pipeline[0].transform[0].codec: unknown codec "brotli" (allowed: gzip, lz4, snappy, zstd)`},
		{"sink compression_level zstd", kpipe("", "", "compression = \"zstd\"\ncompression_level = 9", ""), "compression_level",
			`pipeline[0].sink.compression_level: 9 is out of range (allowed: 1 to 4 for zstd, or 0 for its default)`},
		{"sink compression_level gzip", kpipe("", "", "compression = \"gzip\"\ncompression_level = -1", ""), "compression_level",
			`pipeline[0].sink.compression_level: -1 is out of range (allowed: 1 to 9 for gzip, or 0 for its default)`},
		{"sink compression_level snappy", kpipe("", "", "compression = \"snappy\"\ncompression_level = 2", ""), "compression_level",
			`pipeline[0].sink.compression_level: 2: snappy has no levels (allowed: 0, or leave the key out)`},
		{"sink compression_level lz4", kpipe("", "", "compression = \"lz4\"\ncompression_level = 10", ""), "compression_level",
			`pipeline[0].sink.compression_level: 10 is out of range (allowed: 1 to 9 for lz4, or 0 for its default)`},

		// [journal] and [fluid].
		{"journal expiry_interval zero", pipe("", "", "", "[journal]\nstore = \"sqlite:j.db\"\nexpiry_interval = \"0s\""), "expiry_interval",
			`journal.expiry_interval: "0s" is out of range (allowed: "1s" to "24h")`},
		{"journal expiry_interval negative", pipe("", "", "", "[journal]\nstore = \"sqlite:j.db\"\nexpiry_interval = \"-1m\""), "expiry_interval",
			`journal.expiry_interval: "-1m" is out of range (allowed: "1s" to "24h")`},
		{"fluid baseline_version negative", pipe("", "", "", "[fluid]\nbaseline_version = -1"), "baseline_version",
			`fluid.baseline_version: -1 is out of range (allowed: 0 (the first version) to 1000000)`},

		{"schema registry timeout zero", pipe("", "", "", "[schema_registry]\nurl = \"http://127.0.0.1:1\"\ntimeout = \"0s\""), "timeout",
			`schema_registry.timeout: "0s" is out of range (allowed: "1ms" to "1h")`},
		{"named schema registry timeout negative", pipe("", "", "", "[schema_registry.eu]\nurl = \"http://127.0.0.1:1\"\ntimeout = \"-1s\""), "timeout",
			`schema_registry.eu.timeout: "-1s" is out of range (allowed: "1ms" to "1h")`},

		// Explicit empty strings were replaced by defaults too.
		{"log level empty", pipe("", "", "", "[log]\nlevel = \"\""), "level",
			`log.level: must be debug, info, warn or error, not ""`},
		{"client_id empty", kafkaKey(pipe("", "", "", ""), `client_id = ""`), "client_id",
			`kafka.client_id: must not be empty (allowed: a client id; leave the key out for "streamd")`},
		{"data_dir empty", `data_dir = ""` + "\n" + pipe("", "", "", ""), "data_dir",
			`data_dir: must not be empty (allowed: a directory; leave the key out for "data")`},
		{"policy empty", pipe("", "", "", "[pipeline.errors]\npolicy = \"\""), "policy",
			`pipeline[0].errors.policy: must be dlq, stop or drop, not ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.toml", []byte(tt.src), env(nil))
			want := fmt.Sprintf("c.toml:%d: %s", lineOf(t, tt.src, tt.at), tt.want)
			if err == nil {
				t.Fatalf("accepted; want %q\n%s", want, tt.src)
			}
			// A decoder error also names the column: FILE:LINE:COL.
			if got := colRE.ReplaceAllString(err.Error(), "$1: "); got != want {
				t.Fatalf("got  %q\nwant %q\n%s", err, want, tt.src)
			}
		})
	}
}

// TestExplicitValues: an explicit value in range means what it says, zero
// included; an absent key gets the default of the package that owns the
// setting.
func TestExplicitValues(t *testing.T) {
	c := mustParse(t, kafkaKey(pipe(`shutdown_timeout = "0s"
commit_interval = "0s"
workers = 1
max_in_flight = 1`, "rate = 0\ncount = 0\nkeys = 1", "", `[pipeline.batch]
max_records = 1
max_bytes = 1
linger = "0s"
[pipeline.errors]
retry_initial = "1ms"
retry_max = "1ms"
retry_attempts = 0
[plugins]
watch = "0s"
timeout = "-1s"
max_memory_pages = 1`), "partitions = 1"))
	p := c.Pipelines[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"shutdown_timeout", p.ShutdownTimeout.Duration, time.Duration(0)},
		{"commit_interval", p.CommitInterval.Duration, time.Duration(0)},
		{"workers", p.Workers, 1},
		{"max_in_flight", p.MaxInFlight, 1},
		{"max_records", p.Batch.MaxRecords, 1},
		{"max_bytes", p.Batch.MaxBytes, 1},
		{"linger", p.Batch.Linger.Duration, time.Duration(0)},
		{"retry_initial", p.Errors.RetryInitial.Duration, time.Millisecond},
		{"retry_max", p.Errors.RetryMax.Duration, time.Millisecond},
		{"retry_attempts", p.Errors.RetryAttempts, 0},
		{"rate", p.Source.Rate, 0.0},
		{"count", p.Source.Count, int64(0)},
		{"keys", p.Source.Keys, 1},
		{"partitions", c.Kafka.Partitions, int32(1)},
		{"watch", c.Plugins.Watch.Duration, time.Duration(0)},
		{"timeout", c.Plugins.Timeout.Duration, -time.Second},
		{"max_memory_pages", c.Plugins.MaxMemoryPages, uint32(1)},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

// TestDefaults: absent keys get the defaults, and they are the ones the
// library packages declare (one place for each default).
func TestDefaults(t *testing.T) {
	c := mustParse(t, kpipe("", "", "", "[[pipeline.transform]]\ntype = \"wasm\"\npath = \"x.wasm\""))
	p := c.Pipelines[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"shutdown_timeout", p.ShutdownTimeout.Duration, pipeline.DefaultShutdownTimeout},
		{"commit_interval", p.CommitInterval.Duration, pipeline.DefaultCommitInterval},
		{"workers", p.Workers, pipeline.DefaultWorkers},
		{"max_in_flight", p.MaxInFlight, pipeline.DefaultMaxInFlight},
		{"max_records", p.Batch.MaxRecords, pipeline.DefaultMaxRecords},
		{"max_bytes", p.Batch.MaxBytes, pipeline.DefaultMaxBytes},
		{"linger", p.Batch.Linger.Duration, pipeline.DefaultLinger},
		{"retry_initial", p.Errors.RetryInitial.Duration, pipeline.DefaultRetryInitial},
		{"retry_max", p.Errors.RetryMax.Duration, pipeline.DefaultRetryMax},
		{"session_timeout", p.Source.SessionTimeout.Duration, kafka.DefaultSessionTimeout},
		{"partitions", c.Kafka.Partitions, int32(kafka.DefaultPartitions)},
		{"watch", c.Plugins.Watch.Duration, DefaultWatch},
		{"timeout", c.Plugins.Timeout.Duration, plugins.DefaultTimeout},
		{"max_memory_pages", c.Plugins.MaxMemoryPages, uint32(plugins.DefaultMaxMemoryPages)},
		{"max_table_elements", c.Plugins.MaxTableElements, uint32(plugins.DefaultMaxTableElements)},
		{"max_module_bytes", c.Plugins.MaxModuleBytes, int64(plugins.DefaultMaxModuleBytes)},
		{"compile_timeout", c.Plugins.CompileTimeout.Duration, plugins.DefaultCompileTimeout},
		{"max_log_line_bytes", c.Plugins.MaxLogLineBytes, plugins.DefaultMaxLogLineBytes},
		{"max_log_lines_per_record", c.Plugins.MaxLogLinesPerRecord, plugins.DefaultMaxLogLinesPerRecord},
		{"max_log_bytes_per_record", c.Plugins.MaxLogBytesPerRecord, plugins.DefaultMaxLogBytesPerRecord},
		// A stage without its own limits inherits [plugins]: 0 here.
		{"stage timeout", p.Transforms[0].Timeout.Duration, time.Duration(0)},
		{"stage pool", p.Transforms[0].Pool, 0},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	g := mustParse(t, pipe("", "", "", ""))
	if g.Pipelines[0].Source.Keys != DefaultKeys {
		t.Errorf("keys = %d, want %d", g.Pipelines[0].Source.Keys, DefaultKeys)
	}
}

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse("c.toml", []byte(src), env(nil))
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return c
}

// TestPluginConfigNested: a plugin's config table is the plugin's, nested
// tables and arrays of tables included; none of its keys is "unknown".
func TestPluginConfigNested(t *testing.T) {
	src := pipe("", "", "", `[[pipeline.transform]]
type = "wasm"
path = "x.wasm"
[pipeline.transform.config]
x = {a = {b = 1}}
list = [{c = 2}, {d = [3, 4]}]
[pipeline.transform.config.table]
e = "five"
[[pipeline.transform.config.rows]]
f = 6
`)
	c := mustParse(t, src)
	cfg := c.Pipelines[0].Transforms[0].Config
	if got := cfg["x"].(map[string]any)["a"].(map[string]any)["b"]; got != int64(1) {
		t.Fatalf("config.x.a.b = %v", got)
	}
	if got := cfg["rows"].([]map[string]any)[0]["f"]; got != int64(6) {
		t.Fatalf("config.rows[0].f = %v", got)
	}
}

// TestNestingBounded: a file nested thousands of levels deep is one error
// naming its line and the limit, found before the TOML parser (which is
// quadratic in the depth of inline tables and dotted keys) runs.
func TestNestingBounded(t *testing.T) {
	const n = 5000
	deep := map[string]string{
		"inline tables": "x = " + strings.Repeat("{a=", n) + "1" + strings.Repeat("}", n),
		"arrays":        "x = " + strings.Repeat("[", n) + "1" + strings.Repeat("]", n),
		"dotted key":    "x" + strings.Repeat(".a", n) + " = 1",
		"table header":  "[pipeline.sink.config" + strings.Repeat(".a", n) + "]\nb = 1",
		"mixed":         "x = " + strings.Repeat("{a=[", n/2) + "1" + strings.Repeat("]}", n/2),
	}
	for name, body := range deep {
		t.Run(name, func(t *testing.T) {
			src := pipe("", "", "[pipeline.sink.config]", body)
			line := lineOf(t, src, body[:30])
			_, err := Parse("c.toml", []byte(src), env(nil))
			if err == nil {
				t.Fatal("accepted")
			}
			want := fmt.Sprintf("c.toml:%d: nested more than %d levels deep (allowed: at most %d levels of tables, arrays and dotted keys)", line, MaxDepth, MaxDepth)
			if err.Error() != want {
				t.Fatalf("got %.300q (%d bytes)\nwant %q", err, len(err.Error()), want)
			}
		})
	}
	// x in pipeline[0].sink.config is 5 levels deep (the file, the
	// pipeline array, its element, sink, config): n more tables make n+5.
	at := func(n int) string {
		return pipe("", "", "[pipeline.sink.config]\nx = "+strings.Repeat("{a=", n)+"1"+strings.Repeat("}", n), "")
	}
	mustParse(t, at(MaxDepth-5))
	if _, err := Parse("c.toml", []byte(at(MaxDepth-4)), env(nil)); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("one level over the limit: %v", err)
	}
}

// TestErrorsBounded: a file with thousands of problems gives the first
// few and a count, not one line for each.
func TestErrorsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "unknown_%d = %d\n", i, i)
	}
	src := pipe(b.String(), "", "", "")
	_, err := Parse("c.toml", []byte(src), env(nil))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxErrors+1 {
		t.Fatalf("%d lines, want %d", len(lines), MaxErrors+1)
	}
	if !strings.HasPrefix(lines[0], "c.toml:5: pipeline[0].unknown_0: unknown key") {
		t.Fatalf("first line %q", lines[0])
	}
	if want := fmt.Sprintf("c.toml: and %d more problems", 5000-MaxErrors); lines[MaxErrors] != want {
		t.Fatalf("last line %q, want %q", lines[MaxErrors], want)
	}
}

// TestScanDepthAgrees: the pre-parse scanner never finds a valid file
// deeper than it is, so a file the limit lets through is not refused
// by mistake (checked against the decoded value's depth).
func TestScanDepthAgrees(t *testing.T) {
	for _, src := range scanDepthSamples {
		checkScanDepth(t, src)
	}
}

var scanDepthSamples = []string{
	good,
	"a = 1",
	"a.b.c = 1",
	`"a.b".c = 1`,
	"'a.b' . c = 'x.y.z'",
	"[a.b.c]\nd = 1",
	"[[a]]\nb = 1\n[[a]]\nc = {d = 1}",
	"[[a.b]]\n[a.b.c]\nd = [1, [2, [3]]]",
	"a = \"\"\"\n[[[[x\n{{{{ \"\"\"\nb = '''\n]]]] '''",
	"a = \"[{\\\"[{\" # [[[[ {{{{\nb = [ # [[[[\n 1, # ]]]]\n 2 ]",
	"a = [1.5, 2.5, 3.5]\nb = 1e5\nc = 1979-05-27T07:32:00Z",
	"x = {a=[{b=[{c=1}]}]}",
	"a = [\n  {b = 1},\n  {c = {d = 2}},\n]",
}

// TestParseCutEscape: a file that ends inside a multi-line basic string,
// just after a backslash, is a parse error, not a panic of the depth scan
// (it stepped past the end of the file).
func TestParseCutEscape(t *testing.T) {
	for _, src := range []string{`"""\`, `a = """\`, `a = {b = """x\`, `"""\"""\`} {
		if _, err := Parse("cut.toml", []byte(src), env(nil)); err == nil {
			t.Errorf("Parse(%q): no error", src)
		}
	}
}

func FuzzScanDepth(f *testing.F) {
	for _, s := range scanDepthSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		// Any text: the scan runs before the parser, on files it refuses too.
		scanDepth(src, MaxDepth)
		checkScanDepth(t, src)
	})
}

func checkScanDepth(t *testing.T, src string) {
	if len(src) > 4096 {
		return
	}
	var v map[string]any
	if _, err := toml.Decode(src, &v); err != nil {
		return
	}
	got, _ := scanDepth(src, 1<<30)
	if want := valueDepth(v); got > want {
		t.Fatalf("scanDepth = %d > decoded depth %d for\n%s", got, want, src)
	}
}

// valueDepth: a scalar 0, a table or array one more than its deepest member.
func valueDepth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, valueDepth(e))
		}
		return d + 1
	case []map[string]any:
		for _, e := range v {
			d = max(d, valueDepth(e))
		}
		return d + 1
	case []any:
		for _, e := range v {
			d = max(d, valueDepth(e))
		}
		return d + 1
	}
	return 0
}

// TestStdinSource: a stdin source needs no key, and only one pipeline may
// read standard input (the second is refused at its type's line).
func TestStdinSource(t *testing.T) {
	one := strings.Replace(pipe("", "", "", ""), `type = "generate"`, `type = "stdin"`, 1)
	if _, err := Parse("c.toml", []byte(one), env(nil)); err != nil {
		t.Fatalf("one stdin source: %v", err)
	}
	two := one + `
[[pipeline]]
name = "q"
[pipeline.source]
type = "stdin"
[pipeline.sink]
type = "drop"
`
	_, err := Parse("c.toml", []byte(two), env(nil))
	want := fmt.Sprintf("c.toml:%d:", strings.Count(two[:strings.LastIndex(two, `type = "stdin"`)], "\n")+1)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "pipeline[1].source.type: pipeline[0] already reads standard input") {
		t.Fatalf("two stdin sources: %v; want an error at %s naming pipeline[0]", err, want)
	}
}
