package journal

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// murmur2 is Kafka's Java client hash (Utils.murmur2), written from the
// algorithm's description, to check that the journal's ids land where
// kafka-journal (a Java client) puts them.
func murmur2(data []byte) int32 {
	const m, r = 0x5bd1e995, 24
	h := uint32(0x9747b28c) ^ uint32(len(data))
	n := len(data) / 4
	for i := 0; i < n; i++ {
		k := binary.LittleEndian.Uint32(data[i*4:])
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n*4:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// javaPartition is Kafka's default partition of a keyed record:
// toPositive(murmur2(key)) % partitions.
func javaPartition(key []byte, partitions int) int32 {
	return (murmur2(key) & 0x7fffffff) % int32(partitions)
}

func TestMurmur2Vectors(t *testing.T) {
	// From Kafka's UtilsTest.
	for in, want := range map[string]int32{
		"21":                       -973932308,
		"foobar":                   -790332482,
		"a-little-bit-long-string": -985981536,
	} {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestPartitionIsJavas(t *testing.T) {
	b := testenv.Kafka(t)
	topic := testenv.Topic(t, "part")
	const parts = 7
	b.CreateTopic(t, topic, parts)
	j := New(b.Client(t), KafkaOnly(), WithoutHeadCache())
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("journal-%d-é", i*7919)
		pos, err := j.Purge(context.Background(), Key{Topic: topic, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if want := javaPartition([]byte(id), parts); pos.Partition != want {
			t.Fatalf("id %q went to partition %d; Kafka's Java client puts it in %d", id, pos.Partition, want)
		}
	}
}
