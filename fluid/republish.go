package fluid

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/record"
)

// republishStats are a republisher's counters, for /fluid/status.
type republishStats struct {
	records atomic.Int64
	mu      sync.Mutex
	lastErr string
	next    map[int32]int64
}

func (s *republishStats) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.lastErr = ""
	} else {
		s.lastErr = err.Error()
	}
}

// republish copies topic tv.topic into its downgrade topic for tv.version,
// downgrading records that need it, until ctx ends or an error occurs.
//
// Where it starts, per partition: after the main-topic record named by the
// source headers of the downgrade topic's last record (so a restarted
// bridge never writes a record twice), or at spec.Start for a fresh topic.
func (b *Bridge) republish(ctx context.Context, tv topicVersion, spec republishSpec, stat *republishStats) error {
	dtopic, nparts, err := b.ensureDowngradeTopic(ctx, tv.topic, tv.version)
	if err != nil {
		return err
	}
	ends, err := b.adm.ListEndOffsets(ctx, dtopic)
	if err != nil {
		return err
	}
	offsets := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	for p := int32(0); p < int32(nparts); p++ {
		start, ok := spec.Start[p]
		if !ok {
			start = 0
		}
		e, ok := ends.Lookup(dtopic, p)
		if !ok || e.Err != nil {
			return fmt.Errorf("end offset of %s/%d: %v", dtopic, p, e.Err)
		}
		if e.Offset > 0 {
			last, err := b.lastBefore(ctx, dtopic, p, e.Offset)
			if err != nil {
				return fmt.Errorf("resume %s/%d: %w", dtopic, p, err)
			}
			if last != nil {
				rec := fromKgo(last)
				sp, so, err := sourcePosition(&rec)
				if err != nil {
					return fmt.Errorf("resume %s/%d: %w", dtopic, p, err)
				}
				if sp != p {
					return fmt.Errorf("resume %s/%d: last record came from partition %d", dtopic, p, sp)
				}
				start = max(start, so+1)
			}
		}
		offsets[p] = kgo.NewOffset().At(start)
		next[p] = start
	}
	b.log.Info("fluid: republishing", "topic", tv.topic, "version", tv.version, "downgrade_topic", dtopic, "from", next)
	cons, err := kgo.NewClient(append(append([]kgo.Opt(nil), b.cfg.kopts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tv.topic: offsets}),
		kgo.FetchMaxWait(defaultFetchMaxWait),
	)...)
	if err != nil {
		return err
	}
	defer cons.Close()

	var lastProgress time.Time
	var batch []record.Record
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("read %s: %w", tv.topic, err)
		}
		var out []*kgo.Record
		var perr error
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if perr != nil || len(fp.Records) == 0 {
				return
			}
			batch = batch[:0]
			for _, r := range fp.Records {
				batch = append(batch, fromKgo(r))
			}
			recs, err := b.dg.toVersion(ctx, tv.topic, tv.version, batch)
			if err != nil {
				perr = err
				return
			}
			for i := range recs {
				out = append(out, toKgo(dtopic, &recs[i]))
			}
			next[fp.Partition] = fp.Records[len(fp.Records)-1].Offset + 1
		})
		if perr != nil {
			return perr
		}
		if len(out) == 0 {
			continue
		}
		// Produce and wait: nothing after a failed record may be written,
		// or the downgrade topic would have a gap.
		var wg sync.WaitGroup
		var first atomic.Pointer[error]
		wg.Add(len(out))
		for _, r := range out {
			b.cl.Produce(context.WithoutCancel(ctx), r, func(_ *kgo.Record, err error) {
				if err != nil {
					first.CompareAndSwap(nil, &err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		if e := first.Load(); e != nil {
			return fmt.Errorf("produce to %s: %w", dtopic, *e)
		}
		stat.records.Add(int64(len(out)))
		stat.mu.Lock()
		stat.next = copyMap(next)
		stat.lastErr = ""
		stat.mu.Unlock()
		if time.Since(lastProgress) > time.Second {
			b.state.putAsync(progressKey(tv), progressState{Next: copyMap(next)})
			lastProgress = time.Now()
		}
	}
}

func copyMap(m map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func fromKgo(r *kgo.Record) record.Record {
	out := record.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	if len(r.Headers) > 0 {
		out.Headers = make([]record.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = record.Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}

func toKgo(topic string, r *record.Record) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Partition: r.Partition}
	if len(r.Headers) > 0 {
		out.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return out
}
