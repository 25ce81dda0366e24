package config

import (
	"strings"
	"testing"
)

const good = `
[admin]
listen = "127.0.0.1:8080"
[kafka]
brokers = ["${BROKER}"]
[[pipeline]]
name = "gen"
[pipeline.source]
type = "generate"
count = 10
[pipeline.sink]
type = "kafka"
topic = "orders"
[[pipeline]]
name = "orders"
[pipeline.source]
type = "kafka"
topics = ["orders"]
group = "orders-v1"
[[pipeline.transform]]
type = "wasm"
path = "x.wasm"
[pipeline.transform.config]
greeting = "${GREETING}"
[pipeline.sink]
type = "kafka"
topic = "orders.v1"
compression = "zstd"
[pipeline.errors]
policy = "dlq"
dlq_topic = "orders.dlq"
`

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseGood(t *testing.T) {
	c, err := Parse("dir/c.toml", []byte(good), env(map[string]string{"BROKER": "h:1", "GREETING": "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.Brokers[0] != "h:1" || c.Pipelines[1].Transforms[0].Config["greeting"] != "hi" {
		t.Fatalf("interpolation: %+v", c)
	}
	p := c.Pipelines[1]
	if p.Batch.MaxRecords != 1024 || p.Source.Start != "earliest" || p.Errors.DLQTopic != "orders.dlq" || c.DataDir != "dir/data" {
		t.Fatalf("defaults: %+v", p)
	}
}

func TestParseErrors(t *testing.T) {
	e := env(map[string]string{"BROKER": "h:1", "GREETING": "x"})
	tests := []struct {
		name, edit, want string
		lookup           func(string) (string, bool)
	}{
		{"misspelt key", `topics = ["orders"]` + "\n" + `gruop = "x"`, `c.toml:19: pipeline[1].source.gruop: unknown key (did you mean "group"?)`, e},
		{"misspelt table", "[pipeline.errors]", "c.toml:29: pipeline[1].eror: unknown key", e},
		{"wrong type", `count = 10`, `c.toml:10: pipeline.source.count:`, e},
		{"missing env", "", "c.toml:5: kafka.brokers[0]: environment variable BROKER is not set", env(nil)},
		{"missing required", `topic = "orders.v1"`, "c.toml:25: pipeline[1].sink.topic: required for a kafka sink", e},
		{"bad enum", `compression = "zstd"`, `c.toml:28: pipeline[1].sink.compression: must be none, gzip, snappy, lz4 or zstd, not "brotli"`, e},
		{"syntax", `name = "gen"`, "c.toml:7", e},
	}
	repl := map[string]string{
		"misspelt table":   "[pipeline.eror]",
		"wrong type":       `count = "ten"`,
		"missing required": `topc = "orders.v1"`,
		"bad enum":         `compression = "brotli"`,
		"syntax":           `name = = "gen"`,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := good
			if tt.name == "misspelt key" {
				src = strings.Replace(src, `topics = ["orders"]`, tt.edit, 1)
			} else if r, ok := repl[tt.name]; ok {
				src = strings.Replace(src, tt.edit, r, 1)
			}
			if tt.name == "missing required" {
				// topc is itself an unknown key; check the unknown-key error instead,
				// then check the missing key alone by deleting the line.
				src = strings.Replace(good, `topic = "orders.v1"`+"\n", "", 1)
			}
			_, err := Parse("c.toml", []byte(src), tt.lookup)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

// FuzzParse: any bytes either parse or give an error naming the file;
// never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("[kafka]\nbrokers = [\"a\"]\n[[pipeline]]\nname = \"x\"\n[pipeline.source]\ntype = \"file\"\npath = \"p\"\n[pipeline.sink]\ntype = \"drop\"\n"))
	f.Add([]byte("[[pipeline]]\n[[pipeline.transform]]\n[pipeline.transform.config]\na = \"${X}\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := Parse("f.toml", b, env(map[string]string{"X": "1", "BROKER": "b", "GREETING": "g"}))
		if err != nil && !strings.HasPrefix(err.Error(), "f.toml") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

// TestPluginGrants: the Wasm grant keys of a plugin stage and sink parse,
// and random is unset (crypto/rand) unless given.
func TestPluginGrants(t *testing.T) {
	src := strings.Replace(good, "path = \"x.wasm\"\n", "path = \"x.wasm\"\nclock = true\nrandom = false\ndirs = { \"/in\" = \"in:ro\" }\n", 1)
	c, err := Parse("dir/c.toml", []byte(src), env(map[string]string{"BROKER": "h:1", "GREETING": "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	ps := c.Pipelines[1].Transforms[0].PluginSettings
	if !ps.Clock || ps.Random == nil || *ps.Random || ps.Dirs["/in"] != "in:ro" {
		t.Fatalf("grants: clock %v, random %v, dirs %v", ps.Clock, ps.Random, ps.Dirs)
	}
	c, err = Parse("dir/c.toml", []byte(good), env(map[string]string{"BROKER": "h:1", "GREETING": "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	if ps := c.Pipelines[1].Transforms[0].PluginSettings; ps.Clock || ps.Random != nil {
		t.Fatalf("defaults: clock %v, random %v", ps.Clock, ps.Random)
	}
}
