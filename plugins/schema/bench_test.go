package schema

import (
	"testing"

	"github.com/hamba/avro/v2"
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
