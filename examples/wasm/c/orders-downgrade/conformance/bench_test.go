package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// benchBatch is 256 orders-v2 records, each with a schema header.
func benchBatch() []record.Record {
	v := []byte(`{"order_id":"o-1","customer":{"id":"c-1","name":"Ann"},"amount_cents":1299,"currency":"EUR","tags":["a",1,true,null,{"x":[]}]}`)
	batch := make([]record.Record, 256)
	for i := range batch {
		batch[i] = record.Record{
			Key: []byte("order-key"), Value: v, Timestamp: time.UnixMilli(1_700_000_000_000),
			Headers: []record.Header{{Key: "fluid-schema-version", Value: []byte("2")}},
		}
	}
	return batch
}

func benchTransform(b *testing.B, path string) {
	tr := openPath(b, path).(plugins.Transformer)
	batch := benchBatch()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := tr.Transform(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		if res[0].Err != nil {
			b.Fatal(res[0].Err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDowngrade is the orders downgrade through the Wasm host, 256
// records per call; compare with the other languages' BenchmarkDowngrade.
func BenchmarkDowngrade(b *testing.B) { benchTransform(b, build(b)) }

// BenchmarkIdentity is the identity transform on the same batches: the cost
// of the ABI crossing and the SDK alone.
func BenchmarkIdentity(b *testing.B) { benchTransform(b, identityBuild.get(b)) }
