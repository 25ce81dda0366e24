package pluginv1

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/streamd/streamd/record"
)

func TestCodecRoundTrip(t *testing.T) {
	c := Codec(BufferPool())
	for _, n := range []int{0, 1, 256, 5000} {
		batch := make([]record.Record, n)
		for i := range batch {
			batch[i] = record.Record{Key: []byte{}, Value: bytes.Repeat([]byte{byte(i)}, 200), Offset: int64(i), Timestamp: time.UnixMilli(int64(i) + 1).UTC(),
				Headers: []record.Header{{Key: "h", Value: nil}}}
		}
		in := &ProcessRequest{Op: Op_OP_TRANSFORM, Records: FromRecords(batch)}
		data, err := c.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var out ProcessRequest
		if err := c.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		data.Free()
		if !proto.Equal(in, &out) {
			t.Fatalf("%d records: round trip differs", n)
		}
		got := ToRecords(out.GetRecords())
		for i := range got {
			if got[i].Key == nil || got[i].Headers[0].Value != nil || !got[i].Timestamp.Equal(batch[i].Timestamp) || !bytes.Equal(got[i].Value, batch[i].Value) {
				t.Fatalf("record %d: %+v", i, got[i])
			}
		}
	}
	if _, err := c.Marshal("not a message"); err == nil {
		t.Fatal("marshalled a string")
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{1})}, new(int)); err == nil {
		t.Fatal("unmarshalled into an int")
	}
}

func TestNoTimestampRoundTrip(t *testing.T) {
	r := FromRecord(&record.Record{})
	if r.GetTimestampMs() != NoTimestamp || r.GetKey() != nil || r.GetValue() != nil {
		t.Fatalf("wire %+v", r)
	}
	if back := r.ToRecord(); !back.Timestamp.IsZero() || back.Key != nil || back.Value != nil {
		t.Fatalf("back %+v", back)
	}
}
