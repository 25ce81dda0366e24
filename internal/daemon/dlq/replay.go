package dlq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/record"
)

// Target is where a replay sends records.
type Target interface {
	// Replay makes recs durable where they go, or returns an error; when
	// it returns nil every record is written (or, through a pipeline,
	// handled by its error policy).
	Replay(ctx context.Context, recs []record.Record) error
}

// Progress is how far a replay is.
type Progress struct {
	// Ranges are the DLQ offsets the replay reads.
	Ranges []Range `json:"ranges"`
	// Total is the offsets in Ranges; Scanned how many of them were read.
	Total   int64 `json:"total"`
	Scanned int64 `json:"scanned"`
	// Matched dead letters the filter selected; Replayed of them the
	// target took; Skipped (truncated) could not be replayed.
	Matched  int64 `json:"matched"`
	Replayed int64 `json:"replayed"`
	Skipped  int64 `json:"skipped"`
	// Done is set once the replay ended; Err says why it stopped early.
	Done bool   `json:"done"`
	Err  string `json:"error,omitempty"`
	// Stopped says why a replay that did not fail ended before the end of
	// its selection (its bound of records); Resume says where to go on.
	Stopped string `json:"stopped,omitempty"`
	// Resume is, per DLQ partition, the offset after the last dead
	// letter replayed (or skipped): a replay stopped part-way resumes
	// with From there.
	Resume map[int32]int64 `json:"resume,omitempty"`
	// SkippedAt lists the first skipped dead letters (at most 20).
	SkippedAt []string  `json:"skipped_at,omitempty"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended,omitzero"`
}

func (p *Progress) clone() Progress {
	c := *p
	c.Ranges = append([]Range(nil), p.Ranges...)
	c.SkippedAt = append([]string(nil), p.SkippedAt...)
	if p.Resume != nil {
		c.Resume = make(map[int32]int64, len(p.Resume))
		for k, v := range p.Resume {
			c.Resume[k] = v
		}
	}
	return c
}

// ReplayOptions tune Replay.
type ReplayOptions struct {
	// Batch is how many records go to the target at once (default 500).
	Batch int
	// MaxRecords bounds the dead letters one replay selects (0: no
	// bound); at the bound it stops, with Progress.Stopped and Resume.
	MaxRecords int64
	// Force marks the replayed records (HeaderReplayForce) so that one
	// rejected again is dead-lettered again (GuardReplays).
	Force bool
	// Progress, if set, is called after every batch and at the end.
	Progress func(Progress)
}

// Replay sends the original records of the dead letters f selects to
// to, in batches, each partition's in offset order, and returns the
// final progress. It stops at the first error of the target or the
// reader (Progress.Err, and the error returned).
func Replay(ctx context.Context, r *Reader, f Filter, to Target, o ReplayOptions) (Progress, error) {
	if o.Batch <= 0 {
		o.Batch = 500
	}
	var mu sync.Mutex
	pr := Progress{Started: time.Now(), Resume: map[int32]int64{}}
	report := func() {
		if o.Progress != nil {
			mu.Lock()
			c := pr.clone()
			mu.Unlock()
			o.Progress(c)
		}
	}
	finish := func(err error) (Progress, error) {
		mu.Lock()
		pr.Done, pr.Ended = true, time.Now()
		if err != nil {
			pr.Err = err.Error()
		}
		c := pr.clone()
		mu.Unlock()
		if o.Progress != nil {
			o.Progress(c)
		}
		return c, err
	}
	ranges, err := r.Ranges(ctx, f)
	if err != nil {
		return finish(err)
	}
	mu.Lock()
	pr.Ranges = ranges
	for _, rg := range ranges {
		pr.Total += max(0, rg.End-rg.Start)
	}
	mu.Unlock()
	report()

	base := map[int32]int64{}
	for _, rg := range ranges {
		base[rg.Partition] = rg.Start
	}
	var batch []record.Record
	var batchEnd map[int32]int64 // per partition, the offset after the batch's last entry
	flush := func() error {
		if len(batch) > 0 {
			if err := to.Replay(ctx, batch); err != nil {
				first, _ := batch[0].Header(HeaderReplayOf)
				return fmt.Errorf("replay of %d records (the first from dead letter %s): %w", len(batch), first, err)
			}
		}
		mu.Lock()
		pr.Replayed += int64(len(batch))
		for p, n := range batchEnd {
			pr.Resume[p] = n
		}
		mu.Unlock()
		batch, batchEnd = batch[:0], nil
		report()
		return nil
	}
	bounded := false
	err = r.Scan(ctx, ranges, f, func(e *Entry) error {
		if o.MaxRecords > 0 && pr.Matched >= o.MaxRecords {
			bounded = true
			return ErrStop
		}
		mu.Lock()
		pr.Matched++
		mu.Unlock()
		if batchEnd == nil {
			batchEnd = map[int32]int64{}
		}
		batchEnd[e.Partition] = e.Offset + 1
		rec, err := e.Original(r.topic)
		if err != nil {
			mu.Lock()
			pr.Skipped++
			if len(pr.SkippedAt) < 20 {
				pr.SkippedAt = append(pr.SkippedAt, err.Error())
			}
			mu.Unlock()
			return nil
		}
		if o.Force {
			rec.SetHeader(HeaderReplayForce, []byte("1"))
		}
		batch = append(batch, rec)
		if len(batch) >= o.Batch {
			return flush()
		}
		return nil
	}, func(p int32, next int64) {
		mu.Lock()
		pr.Scanned += next - base[p]
		base[p] = next
		mu.Unlock()
	})
	if err == nil {
		err = flush()
	}
	if err == nil && bounded {
		mu.Lock()
		pr.Stopped = fmt.Sprintf("stopped at the bound of %d records a replay; the rest is where Resume says", o.MaxRecords)
		mu.Unlock()
	}
	return finish(err)
}

// ToTopic is a Target that produces records back to Kafka with cl (an
// idempotent producer with acks from all in-sync replicas is franz-go's
// default): to each record's own topic and partition (its source), or to
// topic when it is not "" (partitioned by key then).
func ToTopic(cl *kgo.Client, topic string) Target { return &toTopic{cl: cl, topic: topic} }

type toTopic struct {
	cl    *kgo.Client
	topic string
}

func (t *toTopic) Replay(ctx context.Context, recs []record.Record) error {
	krs := make([]*kgo.Record, len(recs))
	for i := range recs {
		r := &recs[i]
		kr := &kgo.Record{Key: r.Key, Value: r.Value, Topic: r.Topic, Partition: r.Partition}
		if t.topic != "" {
			kr.Topic, kr.Partition = t.topic, -1
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		krs[i] = kr
	}
	var errs []error
	for _, res := range t.cl.ProduceSync(ctx, krs...) {
		if res.Err != nil {
			errs = append(errs, fmt.Errorf("%s/%d: %w", res.Record.Topic, res.Record.Partition, res.Err))
			if len(errs) >= 3 {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// Partitioner is the franz-go partitioner ToTopic's client needs: a
// record keeps the partition it has (its source partition) unless it is
// -1 or the topic has no such partition (any more); then it is hashed by
// key.
func Partitioner() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		hash := kgo.StickyKeyPartitioner(nil).ForTopic("")
		return func(r *kgo.Record, n int) int {
			if r.Partition >= 0 && int(r.Partition) < n {
				return int(r.Partition)
			}
			return hash.Partition(r, n)
		}
	})
}
