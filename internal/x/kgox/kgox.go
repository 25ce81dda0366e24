package kgox

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamd/streamd/record"
)

// Record returns r as a record.Record. Key, value and header values are
// shared with r, not copied.
func Record(r *kgo.Record) record.Record {
	var out record.Record
	var slab []record.Header
	if len(r.Headers) > 0 {
		slab = make([]record.Header, 0, len(r.Headers))
	}
	SetRecord(&out, r, &slab)
	return out
}

// AppendRecords appends rs, converted, to dst; the headers of all of them
// come from one slab.
func AppendRecords(dst []record.Record, rs []*kgo.Record) []record.Record {
	slab := make([]record.Header, 0, HeaderCount(rs))
	for _, r := range rs {
		dst = append(dst, record.Record{})
		SetRecord(&dst[len(dst)-1], r, &slab)
	}
	return dst
}

// HeaderCount returns how many headers rs have together: the size of a
// slab for SetRecord.
func HeaderCount(rs []*kgo.Record) int {
	n := 0
	for _, r := range rs {
		n += len(r.Headers)
	}
	return n
}

// SetRecord sets *out to r converted; r's headers are appended to *slab and
// out's headers are that part of it (capped, so that appending to them
// never writes into the slab).
func SetRecord(out *record.Record, r *kgo.Record, slab *[]record.Header) {
	*out = record.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	if len(r.Headers) == 0 {
		return
	}
	h := *slab
	start := len(h)
	for _, x := range r.Headers {
		h = append(h, record.Header{Key: x.Key, Value: x.Value})
	}
	out.Headers = h[start:len(h):len(h)]
	*slab = h
}

// KgoRecords returns recs as franz-go records to produce to topic, with
// each record's partition (used by a manual partitioner, overwritten by
// any other); the headers of all of them come from one slab.
func KgoRecords(recs []record.Record, topic string) []kgo.Record {
	out := make([]kgo.Record, len(recs))
	nh := 0
	for i := range recs {
		nh += len(recs[i].Headers)
	}
	slab := make([]kgo.RecordHeader, 0, nh)
	for i := range recs {
		SetKgoRecord(&out[i], &recs[i], topic, &slab)
	}
	return out
}

// SetKgoRecord sets *out to r as a franz-go record to produce to topic;
// r's headers are appended to *slab, as in SetRecord.
func SetKgoRecord(out *kgo.Record, r *record.Record, topic string, slab *[]kgo.RecordHeader) {
	*out = kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Partition: r.Partition}
	if len(r.Headers) == 0 {
		return
	}
	h := *slab
	start := len(h)
	for _, x := range r.Headers {
		h = append(h, kgo.RecordHeader{Key: x.Key, Value: x.Value})
	}
	out.Headers = h[start:len(h):len(h)]
	*slab = h
}

// Commit commits offsets for cl's group and waits for the answer. It
// returns the request's error, or the first partition's error naming the
// partition ("commit TOPIC/PARTITION: ...").
func Commit(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) error {
	var cerr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			name := t.Topic
			if name == "" { // OffsetCommit v10+ answers by topic id only
				for _, rt := range req.Topics {
					if rt.TopicID == t.TopicID {
						name = rt.Topic
						break
					}
				}
			}
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil && cerr == nil {
					cerr = fmt.Errorf("commit %s/%d: %w", name, p.Partition, e)
				}
			}
		}
	})
	return cerr
}
