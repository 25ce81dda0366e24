package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

const benchOrderAvro = `{"type":"record","name":"Order","namespace":"com.acme.orders","fields":[
 {"name":"order_id","type":"string"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"string"},{"name":"name","type":"string"}]}},
 {"name":"amount_cents","type":"long"},
 {"name":"currency","type":"string"},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"note","type":"string"}]}`

type benchCustomer struct {
	ID   string `avro:"id" json:"id"`
	Name string `avro:"name" json:"name"`
}

type benchOrder struct {
	OrderID     string        `avro:"order_id" json:"order_id"`
	Customer    benchCustomer `avro:"customer" json:"customer"`
	AmountCents int64         `avro:"amount_cents" json:"amount_cents"`
	Currency    string        `avro:"currency" json:"currency"`
	Tags        []string      `avro:"tags" json:"tags"`
	Note        string        `avro:"note" json:"note"`
}

// benchOrderN is order n, ~200 bytes as JSON (like the orders of
// BenchmarkKafkaWasmKafka).
func benchOrderN(n int) benchOrder {
	c := n % 1000
	o := benchOrder{OrderID: fmt.Sprintf("o-%d", n), Customer: benchCustomer{fmt.Sprintf("c-%d", c), fmt.Sprintf("Customer %d", c)},
		AmountCents: int64(n*7919) % 100000, Currency: []string{"EUR", "USD", "GBP"}[n%3], Tags: []string{"generated", fmt.Sprintf("batch-%d", n/1000)}}
	b, _ := json.Marshal(o)
	o.Note = strings.Repeat("0", max(1, 200-len(b)-12))
	return o
}

// inProcessIdentity is the plugin file name schemaBenchOpen answers with
// an identity transform in process: the stage costs nothing but the
// pipeline's own handling, so the rows compare the schema stages alone.
const inProcessIdentity = "inprocess-identity.wasm"

type identity struct{}

func (identity) Manifest() plugins.Manifest {
	return plugins.Manifest{Name: "identity", Kind: plugins.KindTransform, Version: "1", ABI: 1}
}
func (identity) Close(context.Context) error { return nil }
func (identity) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	res := make([]plugins.Result, len(batch))
	for i := range batch {
		res[i].Records = batch[i : i+1 : i+1]
	}
	return res, nil
}

func schemaBenchOpen(ctx context.Context, ref string, o plugins.Options) (plugins.Plugin, error) {
	if strings.HasSuffix(ref, "/"+inProcessIdentity) {
		return identity{}, nil
	}
	return benchOpen(ctx, ref, o)
}

// BenchmarkSchemaAvro: kafka -> schema decode ->
// identity -> schema encode -> kafka on framed Avro orders, against the
// same pipeline without the schema stages on the same orders as JSON
// (~200 bytes; the Avro ones are ~110), built from TOML as `streamd run`
// builds it, 4 partitions, on one in-process kfake broker (or the brokers
// in STREAMD_BENCH_BROKERS), the registry an in-process srfake (schemas are
// cached by id after the first batch; Apicurio with
// STREAMD_BENCH_SCHEMA_REGISTRY_URL). identity=inprocess is a Go function
// (the schema stages' cost alone); identity=wasm-c is the C identity plugin
// (make examples), what a user's transform between the stages costs.
//
//	go test ./internal/daemon/app -run '^$' -bench SchemaAvro -benchtime 200000x -count 3
//
// Compare format=avro with format=json (benchstat -col /format).
func BenchmarkSchemaAvro(b *testing.B) {
	for _, ident := range []string{"inprocess", "wasm-c"} {
		path := filepath.Join(b.TempDir(), inProcessIdentity)
		if ident == "wasm-c" {
			p, err := filepath.Abs("../../../examples/wasm/c/identity/plugin.wasm")
			if err != nil {
				b.Fatal(err)
			}
			path = p
		}
		for _, format := range []string{"json", "avro"} {
			b.Run(fmt.Sprintf("identity=%s/format=%s", ident, format), func(b *testing.B) {
				if ident == "wasm-c" {
					if _, err := os.Stat(path); err != nil {
						b.Skipf("no %s (make examples)", path)
					}
				}
				benchSchema(b, format, path)
			})
		}
	}
}

func benchSchema(b *testing.B, format, plugin string) {
	seeds, topic := benchBrokers(b)
	in, out := topic+"-in", topic+"-out"
	adm := kadm.NewClient(newClient(b, seeds))
	if _, err := adm.CreateTopics(context.Background(), 4, 1, nil, in, out); err != nil {
		b.Fatal(err)
	}
	regURL := srURLForBench(b)
	var id int
	if format == "avro" {
		cl, err := sr.NewClient(sr.URLs(regURL))
		if err != nil {
			b.Fatal(err)
		}
		if id, err = cl.RegisterSchema(context.Background(), in+"-value", sr.Schema{Schema: benchOrderAvro}, -1, -1); err != nil {
			b.Fatal(err)
		}
		if _, err = cl.RegisterSchema(context.Background(), out+"-value", sr.Schema{Schema: benchOrderAvro}, -1, -1); err != nil {
			b.Fatal(err)
		}
	}
	fillBenchOrders(b, seeds, in, b.N, format, id)
	src := fmt.Sprintf(`
data_dir = %q
[kafka]
brokers = [%q]
[schema_registry]
url = %q
[[pipeline]]
name = "bench"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "%s-group"
`, b.TempDir(), strings.Join(seeds, `","`), regURL, in, in)
	stage := func(typ, extra string) { src += "[[pipeline.transform]]\ntype = \"" + typ + "\"\n" + extra }
	if format == "avro" {
		stage("schema", "mode = \"decode\"\n")
	}
	stage("wasm", fmt.Sprintf("path = %q\n", plugin))
	if format == "avro" {
		stage("schema", "mode = \"encode\"\n")
	}
	src += fmt.Sprintf("[pipeline.sink]\ntype = \"kafka\"\ntopic = %q\n[pipeline.errors]\npolicy = \"stop\"\n", out)
	cfg, err := config.Parse("bench.toml", []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	a, err := app.Build(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), schemaBenchOpen, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	defer testenv.Close(b, context.Background(), a)
	b.ResetTimer()
	moved, took, cpu := runUntil(b, a, int64(b.N), 2*time.Millisecond, func(ctx context.Context) (int64, error) {
		ends, err := adm.ListEndOffsets(ctx, out)
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n, err
	})
	b.StopTimer()
	b.ReportMetric(float64(moved)/took.Seconds(), "records/s")
	b.ReportMetric(float64(cpu)/float64(moved), "cpu-ns/record")
}

func srURLForBench(b *testing.B) string {
	if u := strings.TrimSpace(os.Getenv("STREAMD_BENCH_SCHEMA_REGISTRY_URL")); u != "" {
		return u
	}
	f := srfake.New()
	b.Cleanup(f.Close)
	return f.URL()
}

func fillBenchOrders(b *testing.B, seeds []string, topic string, n int, format string, id int) {
	cl := newClient(b, seeds, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	s := avro.MustParse(benchOrderAvro)
	var failed atomic.Value
	for i := 0; i < n; i++ {
		o := benchOrderN(i)
		var v []byte
		var err error
		if format == "avro" {
			v, err = avro.Marshal(s, o)
			v = append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, v...)
		} else {
			v, err = json.Marshal(o)
		}
		if err != nil {
			b.Fatal(err)
		}
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(o.Customer.ID), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}
