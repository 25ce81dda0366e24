package app_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins/schema"
)

const (
	orderV2Avro = `{"type":"record","name":"Order","namespace":"com.acme.orders","fields":[
 {"name":"order_id","type":"string"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"string"},{"name":"name","type":"string"}]}},
 {"name":"amount_cents","type":"long"},
 {"name":"currency","type":"string"},
 {"name":"tags","type":{"type":"array","items":"string"}}]}`
	orderV1Avro = `{"type":"record","name":"Order","namespace":"com.acme.orders","fields":[
 {"name":"order_id","type":"string"},{"name":"customer_id","type":"string"},{"name":"amount_cents","type":"long"},{"name":"currency","type":"string"}]}`
)

type customerV2 struct {
	ID   string `avro:"id"`
	Name string `avro:"name"`
}

type orderV2 struct {
	OrderID     string     `avro:"order_id"`
	Customer    customerV2 `avro:"customer"`
	AmountCents int64      `avro:"amount_cents"`
	Currency    string     `avro:"currency"`
	Tags        []string   `avro:"tags"`
}

type orderV1 struct {
	OrderID     string `avro:"order_id"`
	CustomerID  string `avro:"customer_id"`
	AmountCents int64  `avro:"amount_cents"`
	Currency    string `avro:"currency"`
}

func makeOrder(i int) orderV2 {
	c := i % 1000
	names := []string{"Ann", "Bjørn", "Zoë \"Z\"", "李", "back\\slash"}
	return orderV2{
		OrderID:     fmt.Sprintf("o-%d", i),
		Customer:    customerV2{ID: fmt.Sprintf("c-%d", c), Name: names[c%len(names)]},
		AmountCents: int64(i*7919%100000) - 5000,
		Currency:    []string{"EUR", "USD", "GBP", "NOK"}[i%4],
		Tags:        []string{"generated", fmt.Sprintf("batch-%d", i/1000)}[:i%3],
	}
}

// TestSchemaAvroDowngrade: 100,000 Avro orders
// (v2, written with hamba/avro as the reference encoder) go through
// schema decode -> the Go Wasm orders downgrade -> schema encode against
// the v1 subject (looked up, not registered) -> Kafka; every value that
// comes out is byte-identical to the reference encoding of the same order
// as v1, framed with the v1 schema's id.
func TestSchemaAvroDowngrade(t *testing.T) {
	u := testenv.SchemaRegistry(t)
	broker := testenv.Kafka(t)
	plugin := downgradePlugin(t, "go")
	reg := registryClient(t, u)
	in, out := testenv.Topic(t, "dg-in"), testenv.Topic(t, "dg-out")
	broker.CreateTopic(t, in, 1)
	broker.CreateTopic(t, out, 1)
	v2 := register(t, reg, in+"-value", orderV2Avro)
	v1 := register(t, reg, out+"-value", orderV1Avro)
	s2, s1 := avro.MustParse(orderV2Avro), avro.MustParse(orderV1Avro)

	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	cl := broker.Client(t, kgo.ProducerBatchMaxBytes(1<<20), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := make([][]byte, n)
	for lo := 0; lo < n; lo += 10_000 {
		var vals [][]byte
		for i := lo; i < min(lo+10_000, n); i++ {
			o := makeOrder(i)
			b, err := avro.Marshal(s2, o)
			if err != nil {
				t.Fatal(err)
			}
			vals = append(vals, append(schema.AppendFrame(nil, v2), b...))
			r, err := avro.Marshal(s1, orderV1{o.OrderID, o.Customer.ID, o.AmountCents, o.Currency})
			if err != nil {
				t.Fatal(err)
			}
			want[i] = append(schema.AppendFrame(nil, v1), r...)
		}
		produce(t, cl, in, vals...)
	}
	v1File := t.TempDir() + "/order-v1.avsc"
	writeFile(t, v1File, orderV1Avro)
	schemaApp(t, fmt.Sprintf(`
[kafka]
brokers = [%q]
[schema_registry]
url = %q
[[pipeline]]
name = "downgrade"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "%s-g"
[[pipeline.transform]]
type = "schema"
mode = "decode"
[[pipeline.transform]]
type = "wasm"
path = %q
[[pipeline.transform]]
type = "schema"
mode = "encode"
schema_file = %q
[pipeline.sink]
type = "kafka"
topic = %q
`, strings.Join(broker.Seeds, ","), u, in, in, plugin, v1File, out))
	got := readN(t, cl, out, n)
	for i, r := range got {
		if !bytes.Equal(r.Value, want[i]) {
			t.Fatalf("record %d: %x\nwant %x (reference encoder)", i, r.Value, want[i])
		}
		if h := header(r, "fluid-schema-version"); h != "1" {
			t.Fatalf("record %d: fluid-schema-version %q", i, h)
		}
	}
	t.Logf("%d records byte-identical to the reference encoding", len(got))
}
