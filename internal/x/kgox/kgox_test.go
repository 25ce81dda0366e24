package kgox

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamd/streamd/record"
)

func TestRoundTrip(t *testing.T) {
	ts := time.UnixMilli(1700000000123)
	recs := []record.Record{
		{Key: []byte("k1"), Value: []byte("v1"), Timestamp: ts, Topic: "in", Partition: 2, Offset: 7,
			Headers: []record.Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}}},
		{Key: nil, Value: nil, Partition: 1, Offset: 8},
		{Value: []byte("v3"), Headers: []record.Header{{Key: "b", Value: nil}}, Partition: 3},
	}
	krs := KgoRecords(recs, "out")
	ptrs := make([]*kgo.Record, len(krs))
	for i := range krs {
		if krs[i].Topic != "out" || krs[i].Partition != recs[i].Partition || !krs[i].Timestamp.Equal(recs[i].Timestamp) {
			t.Fatalf("kgo record %d: %+v", i, krs[i])
		}
		krs[i].Topic, krs[i].Offset = recs[i].Topic, recs[i].Offset // as a fetch would have them
		ptrs[i] = &krs[i]
	}
	back := AppendRecords(nil, ptrs)
	for i := range recs {
		if !reflect.DeepEqual(back[i], recs[i]) && !(len(recs[i].Headers) == 0 && back[i].Headers == nil) {
			t.Errorf("record %d: %+v, want %+v", i, back[i], recs[i])
		}
		if one := Record(ptrs[i]); !reflect.DeepEqual(one, back[i]) {
			t.Errorf("Record(%d) = %+v, AppendRecords gave %+v", i, one, back[i])
		}
	}
	// A slab that starts empty and grows (the Kafka source's, which does
	// not count a fetch's headers first) gives the same records.
	var slab []record.Header
	for i := range ptrs {
		var r record.Record
		SetRecord(&r, ptrs[i], &slab)
		if !reflect.DeepEqual(r, back[i]) {
			t.Errorf("record %d from a growing slab: %+v, want %+v", i, r, back[i])
		}
	}
	// Headers come from one slab but each record's are capped: appending
	// to one record's headers does not overwrite the next record's.
	back[0].Headers = append(back[0].Headers, record.Header{Key: "x"})
	if back[2].Headers[0].Key != "b" {
		t.Fatalf("appending to record 0's headers overwrote record 2's: %+v", back[2].Headers)
	}
	krs[0].Headers = append(krs[0].Headers, kgo.RecordHeader{Key: "x"})
	if krs[2].Headers[0].Key != "b" {
		t.Fatalf("appending to kgo record 0's headers overwrote record 2's: %+v", krs[2].Headers)
	}
}

func TestCommitErrors(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	offsets := map[string]map[int32]kgo.EpochOffset{"t": {0: {Epoch: -1, Offset: 0}}}
	// A request error: a client without a group.
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := Commit(ctx, plain, offsets); err == nil {
		t.Fatal("commit without a group succeeded")
	}
	// A partition's error: the broker refuses the commit for the group.
	c.ControlKey(int16(8), func(req kmsg.Request) (kmsg.Response, error, bool) { // OffsetCommit
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID // v10 answers by id
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.GroupAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	gc, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	err = Commit(ctx, gc, offsets)
	if !errors.Is(err, kerr.GroupAuthorizationFailed) || !strings.Contains(err.Error(), "commit t/0") {
		t.Fatalf("err = %v, want GROUP_AUTHORIZATION_FAILED naming t/0", err)
	}
}
