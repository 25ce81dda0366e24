package app_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/tests/testenv/faultproxy"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins/schema"
)

const (
	eventV1 = `{"type":"record","name":"Event","namespace":"t.dlq","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`
	// eventV2 adds a field with a default: backward compatible with v1.
	eventV2 = `{"type":"record","name":"Event","namespace":"t.dlq","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"tag","type":"string","default":"-"}]}`
	// eventBad changes a field's type: incompatible with v1.
	eventBad = `{"type":"record","name":"Event","namespace":"t.dlq","fields":[{"name":"id","type":"string"},{"name":"name","type":"string"}]}`
)

type event struct {
	ID   int64  `avro:"id"`
	Name string `avro:"name"`
	Tag  string `avro:"tag"`
}

func registryClient(t *testing.T, u string) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(u))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func register(t *testing.T, cl *sr.Client, subject, text string) int {
	t.Helper()
	id, err := cl.RegisterSchema(context.Background(), subject, sr.Schema{Schema: text}, -1, -1)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return id
}

// framedEvent is a reference encoding (hamba/avro, then the frame).
func framedEvent(t *testing.T, id int, text string, e event) []byte {
	t.Helper()
	v := any(e)
	if !strings.Contains(text, `"tag"`) {
		v = struct {
			ID   int64  `avro:"id"`
			Name string `avro:"name"`
		}{e.ID, e.Name}
	}
	b, err := avro.Marshal(avro.MustParse(text), v)
	if err != nil {
		t.Fatal(err)
	}
	return append(schema.AppendFrame(nil, id), b...)
}

func produce(t *testing.T, cl *kgo.Client, topic string, values ...[]byte) {
	t.Helper()
	var rs []*kgo.Record
	for i, v := range values {
		rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k-%d", i), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

// TestSchemaVerdictsToDLQ: a schema id the
// registry does not know, a payload that does not match its schema, and an
// encode that violates the subject's compatibility each go to the DLQ with
// the reason; good records around them go through.
func TestSchemaVerdictsToDLQ(t *testing.T) {
	u := testenv.SchemaRegistry(t)
	broker := testenv.Kafka(t)
	reg := registryClient(t, u)
	in, out, dlq := testenv.Topic(t, "dlq-in"), testenv.Topic(t, "dlq-out"), testenv.Topic(t, "dlq-dlq")
	jsonIn, encOut := testenv.Topic(t, "dlq-json"), testenv.Topic(t, "dlq-enc")
	for _, tp := range []string{in, out, dlq, jsonIn, encOut} {
		broker.CreateTopic(t, tp, 1)
	}
	v1 := register(t, reg, in+"-value", eventV1)
	// The encode subject holds v1 and enforces BACKWARD compatibility.
	register(t, reg, encOut+"-value", eventV1)
	if r := reg.SetCompatibility(context.Background(), sr.SetCompatibility{Level: sr.CompatBackward}, encOut+"-value"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	unknown := 2_000_000_000
	good := framedEvent(t, v1, eventV1, event{ID: 1, Name: "one"})
	cl := broker.Client(t, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produce(t, cl, in,
		good,
		framedEvent(t, unknown, eventV1, event{ID: 2, Name: "two"}), // unknown id
		append(schema.AppendFrame(nil, v1), 0x04, 0x08, 'x'),        // string length 4, 1 byte
		[]byte(`{"id":4,"name":"not framed"}`),
		framedEvent(t, v1, eventV1, event{ID: 5, Name: "five"}),
	)
	produce(t, cl, jsonIn, []byte(`{"id":"a","name":"x"}`), []byte(`{"id":"b","name":"y"}`))
	schemaFile := t.TempDir() + "/bad.avsc"
	writeFile(t, schemaFile, eventBad)
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
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
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
[pipeline.sink]
type = "kafka"
topic = %q
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
`, strings.Join(broker.Seeds, ","), u, in, in, out, dlq, jsonIn, jsonIn, schemaFile, encOut, dlq))

	got := readN(t, cl, out, 2)
	if string(got[0].Value) != `{"id":1,"name":"one"}` || string(got[1].Value) != `{"id":5,"name":"five"}` {
		t.Fatalf("out: %s, %s", got[0].Value, got[1].Value)
	}
	dead := readN(t, cl, dlq, 5)
	reasons := map[string]string{}
	for _, r := range dead {
		reasons[header(r, pipeline.HeaderSourceTopic)+"/"+header(r, pipeline.HeaderSourceOffset)] = header(r, pipeline.HeaderError)
	}
	for at, want := range map[string]string{
		in + "/1":     fmt.Sprintf("schema decode (value): schema id %d: ", unknown),
		in + "/2":     fmt.Sprintf("schema decode (value): schema id %d (subject %s-value, avro): name: unexpected end of data", v1, in),
		in + "/3":     "not in the Confluent wire format",
		jsonIn + "/0": "schema encode (value): registering the schema under subject " + encOut + "-value: ",
		jsonIn + "/1": "(HTTP 409",
	} {
		if !strings.Contains(reasons[at], want) {
			t.Errorf("DLQ record from %s: reason %q, want it to contain %q", at, reasons[at], want)
		}
	}
	if !strings.Contains(reasons[in+"/1"], "HTTP 404") {
		t.Errorf("unknown id: %q does not say what the registry answered", reasons[in+"/1"])
	}
	t.Logf("reasons: %q", reasons)
}

// TestSchemaRegistryOutage: the registry is
// down for 30 s while records whose schema streamd has not seen yet arrive
// (a producer moved to v2 of the schema), then unresponsive for 10 s (v3);
// nothing goes to the DLQ, nothing is lost or reordered, and the pipeline
// carries on when the registry is back. (Before the pipeline retried
// plugins.Transient batch errors, all 2,000 v2 records went to the DLQ.)
func TestSchemaRegistryOutage(t *testing.T) {
	u := testenv.SchemaRegistry(t)
	broker := testenv.Kafka(t)
	reg := registryClient(t, u)
	ru, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Listen("127.0.0.1:0", ru.Host)
	if err != nil {
		t.Fatal(err)
	}
	testenv.CloseAtEnd(t, proxy)
	viaProxy := strings.Replace(u, ru.Host, proxy.Addr(), 1)

	in, out, dlq := testenv.Topic(t, "outage-in"), testenv.Topic(t, "outage-out"), testenv.Topic(t, "outage-dlq")
	for _, tp := range []string{in, out, dlq} {
		broker.CreateTopic(t, tp, 1)
	}
	v1 := register(t, reg, in+"-value", eventV1)
	v2 := register(t, reg, in+"-value", eventV2)
	const n = 2000
	cl := broker.Client(t, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var first, second [][]byte
	for i := range n {
		first = append(first, framedEvent(t, v1, eventV1, event{ID: int64(i), Name: "v1"}))
		second = append(second, framedEvent(t, v2, eventV2, event{ID: int64(n + i), Name: "v2", Tag: "t"}))
	}
	produce(t, cl, in, first...)
	schemaApp(t, fmt.Sprintf(`
[kafka]
brokers = [%q]
[schema_registry]
url = %q
timeout = "2s"
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
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
retry_max = "2s"
`, strings.Join(broker.Seeds, ","), viaProxy, in, in, out, dlq))
	readN(t, cl, out, n) // v1 is cached now

	// Down (connections refused) for 30 s, then slow (a black hole that
	// accepts and never answers: every request times out) for 10 s, each
	// time while records of a schema version streamd has not seen arrive.
	v3 := register(t, reg, in+"-value", strings.Replace(eventV2, `"default":"-"}`, `"default":"-"},{"name":"n","type":"int","default":0}`, 1))
	var third [][]byte
	for i := range n {
		e := event{ID: int64(2*n + i), Name: "v3", Tag: "t"}
		b, err := avro.Marshal(avro.MustParse(strings.Replace(eventV2, `"default":"-"}`, `"default":"-"},{"name":"n","type":"int","default":0}`, 1)),
			struct {
				event
				N int32 `avro:"n"`
			}{e, 7})
		if err != nil {
			t.Fatal(err)
		}
		third = append(third, append(schema.AppendFrame(nil, v3), b...))
	}
	for _, fault := range []struct {
		mode faultproxy.Mode
		d    time.Duration
		recs [][]byte
	}{{faultproxy.Refuse, 30 * time.Second, second}, {faultproxy.Blackhole, 10 * time.Second, third}} {
		if err := proxy.Set(fault.mode); err != nil {
			t.Fatal(err)
		}
		down := time.Now()
		produce(t, cl, in, fault.recs...)
		time.Sleep(fault.d)
		if err := proxy.Set(faultproxy.Pass); err != nil {
			t.Fatal(err)
		}
		t.Logf("registry %s for %v (proxy %+v)", fault.mode, time.Since(down).Round(time.Second), proxy.Stats())
	}

	// Nothing in the DLQ: its end offset is 0.
	if ends := endOffsets(t, cl, dlq); ends != 0 {
		t.Errorf("%d records went to the DLQ during a registry outage", ends)
	}
	got := readN(t, broker.Client(t, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), out, 3*n)
	for i, r := range got {
		want := fmt.Sprintf(`{"id":%d,"name":"v1"}`, i)
		switch {
		case i >= 2*n:
			want = fmt.Sprintf(`{"id":%d,"name":"v3","tag":"t","n":7}`, i)
		case i >= n:
			want = fmt.Sprintf(`{"id":%d,"name":"v2","tag":"t"}`, i)
		}
		if string(r.Value) != want {
			t.Fatalf("out[%d] = %s, want %s", i, r.Value, want)
		}
	}
	if ends := endOffsets(t, cl, dlq); ends != 0 {
		t.Fatalf("%d records went to the DLQ during a registry outage", ends)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// endOffsets is the sum of topic's partitions' end offsets.
func endOffsets(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
