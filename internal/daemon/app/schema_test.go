package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// python returns the Python interpreter with Confluent's client and its
// schema-registry serializers (scripts/install-tools schema-registry), or
// calls testenv.Missing.
func python(t *testing.T) string {
	t.Helper()
	py := testenv.Tool(t, "python3")
	if out, err := exec.Command(py, "-c", "import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.protobuf, confluent_kafka.schema_registry.json_schema, fastavro").CombinedOutput(); err != nil {
		testenv.Missing(t, "Python confluent-kafka with its schema-registry serializers (scripts/install-tools schema-registry): "+strings.TrimSpace(string(out)))
	}
	return py
}

// protoGen generates order_pb2.py for the Python client with the protoc
// that grpcio-tools bundles (it matches the protobuf runtime).
func protoGen(t *testing.T, py string) string {
	t.Helper()
	dir := t.TempDir()
	inc, err := exec.Command(py, "-c", "import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), '_proto'))").Output()
	if err != nil {
		testenv.Missing(t, "Python grpcio-tools (scripts/install-tools python)")
	}
	cmd := exec.Command(py, "-m", "grpc_tools.protoc", "-I", "testdata/schema", "-I", strings.TrimSpace(string(inc)), "--python_out="+dir, "order.proto")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("grpc_tools.protoc: %v\n%s", err, out)
	}
	return dir
}

func runPython(t *testing.T, py string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(py, append([]string{"testdata/schema/srclient.py"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("srclient.py %s: %v\n%s", strings.Join(args[:2], " "), err, stderr.String())
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}

// sameJSON compares two JSON documents as values: numbers exactly when both
// are integers (longs beyond 2^53 included), as float64 otherwise.
func sameJSON(a, b []byte) bool {
	norm := func(x []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return numbers(v), err
	}
	x, err1 := norm(a)
	y, err2 := norm(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(x, y)
}

func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if i, ok := new(big.Int).SetString(string(x), 10); ok {
			return i.String()
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// schemaApp builds and starts an app from src; it stops when the test ends.
func schemaApp(t *testing.T, src string) *app.App {
	t.Helper()
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "streamd.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	// Schema files are relative to the test's folder, not the temp dir.
	for i := range cfg.Pipelines {
		for j := range cfg.Pipelines[i].Transforms {
			if f := cfg.Pipelines[i].Transforms[j].SchemaFile; f != "" && !filepath.IsAbs(f) {
				cfg.Pipelines[i].Transforms[j].SchemaFile, _ = filepath.Abs(f)
			}
		}
	}
	a, err := app.Build(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), benchOpen, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("app: %v", err)
		}
		testenv.Close(t, context.Background(), a)
	})
	return a
}

// readN reads n records from topic (from the start), in offset order per
// partition (the topics here have one partition).
func readN(t *testing.T, cl *kgo.Client, topic string, n int) []*kgo.Record {
	t.Helper()
	cl.AddConsumeTopics(topic)
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d of %d records within 90s", topic, len(out), n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == topic {
				out = append(out, r)
			}
		})
	}
	return out
}

// TestSchemaPythonRoundTrip: for Avro, Protobuf
// and JSON Schema, against the real registry (Apicurio) and the test's
// Kafka (kfake, or the real broker): Confluent's Python client writes
// framed records (its serializer registers the schema); streamd decodes
// them to JSON, which must be the JSON of what Python wrote; a second
// pipeline encodes that JSON against a subject of its own (registering
// streamd's copy of the schema), and Python's deserializer reads it back to
// the same values.
func TestSchemaPythonRoundTrip(t *testing.T) {
	py := python(t)
	url := testenv.SchemaRegistry(t)
	broker := testenv.Kafka(t)
	const n = 200
	for _, tc := range []struct{ format, schema, message string }{
		{"avro", "testdata/schema/order.avsc", ""},
		{"protobuf", "testdata/schema/order.proto", "Order"},
		{"json", "testdata/schema/order.schema.json", ""},
	} {
		t.Run(tc.format, func(t *testing.T) {
			in, mid, out := testenv.Topic(t, "sr-in"), testenv.Topic(t, "sr-json"), testenv.Topic(t, "sr-out")
			for _, tp := range []string{in, mid, out} {
				broker.CreateTopic(t, tp, 1)
			}
			pySchema := tc.schema
			if tc.format == "protobuf" {
				pySchema = protoGen(t, py)
			}
			seeds := strings.Join(broker.Seeds, ",")
			want := runPython(t, py, "produce", tc.format, seeds, url, in, pySchema, fmt.Sprint(n))
			if len(want) != n {
				t.Fatalf("python produced %d lines", len(want))
			}
			msg := ""
			if tc.message != "" {
				msg = fmt.Sprintf("message = %q\n", tc.message)
			}
			schemaApp(t, fmt.Sprintf(`
[kafka]
brokers = [%q]
[schema_registry]
url = %q
[[pipeline]]
name = "decode"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "%s-g"
[[pipeline.transform]]
type = "schema"
mode = "decode"
[pipeline.sink]
type = "kafka"
topic = %q
[[pipeline]]
name = "encode"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "%s-g"
[[pipeline.transform]]
type = "schema"
mode = "encode"
schema_file = %q
auto_register = true
%s[pipeline.sink]
type = "kafka"
topic = %q
`, seeds, url, in, in, mid, mid, mid, tc.schema, msg, out))
			cl := broker.Client(t, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := readN(t, cl, mid, n)
			for i, r := range got {
				if string(r.Key) != fmt.Sprintf("k-%d", i) {
					t.Fatalf("record %d: key %q", i, r.Key)
				}
				if !sameJSON(r.Value, []byte(want[i])) {
					t.Fatalf("record %d: streamd decoded\n %s\nPython wrote\n %s", i, r.Value, want[i])
				}
			}
			back := runPython(t, py, "consume", tc.format, seeds, url, out, pySchema, fmt.Sprint(n))
			for i := range want {
				if !sameJSON([]byte(back[i]), []byte(want[i])) {
					t.Fatalf("record %d: Python read back what streamd encoded as\n %s\nwant\n %s", i, back[i], want[i])
				}
			}
		})
	}
}
