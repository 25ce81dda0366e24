package schema

import (
	"context"
	"fmt"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/streamd/streamd/record"
)

const benchOrder = `{"type":"record","name":"Order","namespace":"com.acme.orders","fields":[
 {"name":"order_id","type":"string"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"string"},{"name":"name","type":"string"}]}},
 {"name":"amount_cents","type":"long"},{"name":"currency","type":"string"},
 {"name":"tags","type":{"type":"array","items":"string"}},{"name":"note","type":"string"}]}`

const benchJSON = `{"order_id":"o-12345","customer":{"id":"c-345","name":"Customer 345"},"amount_cents":55555,"currency":"EUR","tags":["generated","batch-12"],"note":"0000000000000000000000000000000000000000000"}`

// BenchmarkAvro: one ~200-byte order, Avro binary to JSON (decode) and
// back (encode), against hamba/avro's generic map[string]any path (what a
// stage built on hamba's own decoding would pay, before turning the map
// into JSON).
//
//	go test ./plugins/schema -run '^$' -bench Avro -count 6
func BenchmarkAvro(b *testing.B) {
	s, err := compileAvro(benchOrder, nil)
	if err != nil {
		b.Fatal(err)
	}
	bin, err := s.encode(nil, []byte(benchJSON))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		b.SetBytes(int64(len(bin)))
		for b.Loop() {
			if _, err := s.decode(buf[:0], bin); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		b.SetBytes(int64(len(benchJSON)))
		for b.Loop() {
			if _, err := s.encode(buf[:0], []byte(benchJSON)); err != nil {
				b.Fatal(err)
			}
		}
	})
	hs := avro.MustParse(benchOrder)
	b.Run("hamba-generic-decode", func(b *testing.B) {
		for b.Loop() {
			var m map[string]any
			if err := avro.Unmarshal(hs, bin, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStageAvro: the decode and the encode stage on a batch of 1024
// ~200-byte orders (as BenchmarkSchemaAvro's pipeline calls them), schemas
// cached; ns/op is per record.
//
//	go test ./plugins/schema -run '^$' -bench StageAvro -count 6
func BenchmarkStageAvro(b *testing.B) {
	f := srfake.New()
	b.Cleanup(f.Close)
	cl, err := sr.NewClient(sr.URLs(f.URL()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	id, err := cl.RegisterSchema(ctx, "orders-value", sr.Schema{Schema: benchOrder}, -1, -1)
	if err != nil {
		b.Fatal(err)
	}
	s, err := compileAvro(benchOrder, nil)
	if err != nil {
		b.Fatal(err)
	}
	const n = 1024
	framed := make([]record.Record, n)
	plain := make([]record.Record, n)
	for i := range framed {
		js := fmt.Sprintf(`{"order_id":"o-%d","customer":{"id":"c-%d","name":"Customer %d"},"amount_cents":%d,"currency":"EUR","tags":["generated","batch-%d"],"note":"0000000000000000000000000000000000000000000"}`, i, i%1000, i%1000, i*7919%100000, i/1000)
		bin, err := s.encode(AppendFrame(nil, id), []byte(js))
		if err != nil {
			b.Fatal(err)
		}
		framed[i] = record.Record{Topic: "orders", Partition: int32(i % 4), Offset: int64(i), Key: []byte("k"), Value: bin}
		plain[i] = record.Record{Topic: "orders", Partition: int32(i % 4), Offset: int64(i), Key: []byte("k"), Value: []byte(js)}
	}
	for _, mode := range []Mode{Decode, Encode} {
		name, in := "decode", framed
		if mode == Encode {
			name, in = "encode", plain
		}
		b.Run(name, func(b *testing.B) {
			st, err := New(cl, Config{Mode: mode})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.Transform(ctx, in); err != nil { // warm the caches
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += n {
				res, err := st.Transform(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				if res[0].Err != nil {
					b.Fatal(res[0].Err)
				}
			}
		})
	}
}
