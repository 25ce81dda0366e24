package fluid

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/x/kgox"
	"github.com/streamd/streamd/record"
)

// republishStats are a republisher's counters, for /fluid/status.
type republishStats struct {
	records atomic.Int64
	mu      sync.Mutex
	lastErr string
	next    map[int32]int64 // position after the last record written, per partition
	resumed map[int32]int64 // where this run started, per partition
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
// Where it starts, per partition, is read from the downgrade topic itself:
// the newest segment (segs, or segment 0 from spec.Start) is being written
// when the downgrade partition's last record carries its id (or a larger
// one), and then republishing resumes after that record's source, so a
// restarted bridge never leaves a hole and rewrites at most what was in
// flight. Otherwise the newest segment starts: at its From, or right after
// the last record's source if that is earlier (never leaving a hole for
// readers at the end).
func (b *Bridge) republish(ctx context.Context, tv topicVersion, spec republishSpec, segs map[int32][]segment, stat *republishStats) error {
	dtopic, nparts, err := b.ensureDowngradeTopic(ctx, tv.topic, tv.version)
	if err != nil {
		return err
	}
	all := make([]int32, nparts)
	for p := range all {
		all[p] = int32(p)
	}
	ends, err := b.endOffsets(ctx, dtopic, all...)
	if err != nil {
		return err
	}
	offsets := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	segID := map[int32][]byte{}
	for p := int32(0); p < int32(nparts); p++ {
		newest := segment{ID: 0, From: spec.Start[p]}
		if ss := segs[p]; len(ss) > 0 {
			newest = ss[len(ss)-1]
		}
		start, seg := newest.From, newest.ID
		end := ends[p]
		if end > 0 {
			last, err := b.lastBefore(ctx, dtopic, p, end)
			if err != nil {
				return fmt.Errorf("resume %s/%d: %w", dtopic, p, err)
			}
			if last != nil {
				rec := kgox.Record(last)
				sp, _, so, lseg, err := sourceRange(&rec)
				if err != nil {
					return fmt.Errorf("resume %s/%d: %w", dtopic, p, err)
				}
				if sp != p {
					return fmt.Errorf("resume %s/%d: last record came from partition %d", dtopic, p, sp)
				}
				if lseg >= newest.ID {
					start, seg = so+1, lseg
				} else {
					start = min(start, so+1)
				}
			}
		}
		offsets[p] = kgo.NewOffset().At(start)
		next[p] = start
		segID[p] = []byte(strconv.FormatInt(seg, 10))
	}
	startAt := copyMap(next) // read by the fetch loop; next is the workers'
	stat.mu.Lock()
	stat.next, stat.resumed = copyMap(next), copyMap(next)
	stat.mu.Unlock()
	b.state.putAsync(progressKey(tv), progressState{Next: copyMap(next)})
	b.log.Info("fluid: republishing", "topic", tv.topic, "version", tv.version, "downgrade_topic", dtopic, "from", next, "segments", segmentIDs(segID))
	cons, err := kgo.NewClient(append(append([]kgo.Opt(nil), b.cfg.kopts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tv.topic: offsets}),
		kgo.FetchMaxWait(defaultFetchMaxWait),
		// Aborted records are not records of the topic; consumers read
		// committed too, so positions mean the same on both sides.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return err
	}
	defer cons.Close()

	// One worker per partition: partitions are downgraded and written in
	// parallel, each in order, and a partition's next batch is only written
	// once the previous one is acknowledged (no gap after a failed write).
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var (
		wg           sync.WaitGroup
		errOnce      sync.Once
		werr         error
		progressMu   sync.Mutex
		lastProgress time.Time
	)
	fail := func(err error) {
		errOnce.Do(func() { werr = err })
		wcancel()
	}
	workers := map[int32]chan []*kgo.Record{}
	defer func() {
		for _, ch := range workers {
			close(ch)
		}
		wg.Wait()
		// Where this run stopped, for the next instance's status.
		progressMu.Lock()
		b.state.putAsync(progressKey(tv), progressState{Next: copyMap(next)})
		progressMu.Unlock()
	}()
	work := func(p int32, from int64, ch <-chan []*kgo.Record) {
		defer wg.Done()
		var batch []record.Record
		// The previous batch, written but not yet known to be acknowledged:
		// the next batch is downgraded meanwhile, but only written once
		// the previous one is acknowledged.
		var inFlight func() error
		var inFlightNext int64
		var inFlightN int
		settle := func() bool {
			if inFlight == nil {
				return true
			}
			err := inFlight()
			inFlight = nil
			if err != nil {
				fail(err)
				return false
			}
			stat.records.Add(int64(inFlightN))
			progressMu.Lock()
			defer progressMu.Unlock()
			next[p] = inFlightNext
			stat.mu.Lock()
			stat.next = copyMap(next)
			stat.lastErr = ""
			stat.mu.Unlock()
			if time.Since(lastProgress) > time.Second {
				b.state.putAsync(progressKey(tv), progressState{Next: copyMap(next)})
				lastProgress = time.Now()
			}
			return true
		}
		defer settle()
		// step downgrades one chunk and writes it once the previous chunk is
		// acknowledged; last says nothing else is queued (wait now).
		step := func(recs []*kgo.Record, last bool) bool {
			batch = kgox.AppendRecords(batch[:0], recs)
			out, err := b.dg.toVersionAt(wctx, tv.topic, tv.version, batch, from, segID[p])
			if err != nil {
				settle()
				fail(err)
				return false
			}
			from = recs[len(recs)-1].Offset + 1
			if !settle() {
				return false
			}
			inFlight = b.produceAsync(wctx, dtopic, out)
			inFlightNext, inFlightN = recs[len(recs)-1].Offset+1, len(out)
			if last {
				return settle() // nothing to overlap with: wait now
			}
			return true
		}
		for fetched := range ch {
			if wctx.Err() != nil {
				settle()
				continue // drain
			}
			// Chunks of batchSize: plugins work best on moderate batches.
			for len(fetched) > 0 {
				n := min(len(fetched), b.cfg.batchSize)
				recs := fetched[:n]
				fetched = fetched[n:]
				if !step(recs, len(fetched) == 0 && len(ch) == 0) {
					break
				}
			}
		}
	}
	for {
		fs := cons.PollFetches(wctx)
		if wctx.Err() != nil {
			if ctx.Err() != nil {
				return nil
			}
			return werr
		}
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("read %s: %w", tv.topic, err)
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			ch, ok := workers[fp.Partition]
			if !ok {
				ch = make(chan []*kgo.Record, 2)
				workers[fp.Partition] = ch
				wg.Add(1)
				go work(fp.Partition, startAt[fp.Partition], ch)
			}
			// The whole fetch goes to the partition's worker (which cuts it
			// in chunks), so one busy partition does not hold up the others.
			select {
			case ch <- fp.Records:
			case <-wctx.Done():
			}
		})
	}
}

// produceAsync writes recs to topic (each to its Partition); the returned
// function waits until every one is acknowledged and returns the first
// error. The Kafka records and their headers are carved from one slab per
// call, and one promise serves them all.
func (b *Bridge) produceAsync(ctx context.Context, topic string, recs []record.Record) func() error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	wg.Add(len(recs))
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			first.CompareAndSwap(nil, &err)
		}
		wg.Done()
	}
	// Not cancelled with ctx: a record already handed to the client is
	// waited for, so nothing is left in flight when the republisher stops.
	pctx := context.WithoutCancel(ctx)
	krs := kgox.KgoRecords(recs, topic)
	for i := range krs {
		b.cl.Produce(pctx, &krs[i], promise)
	}
	return func() error {
		wg.Wait()
		if e := first.Load(); e != nil {
			return fmt.Errorf("produce to %s: %w", topic, *e)
		}
		return nil
	}
}

func segmentIDs(m map[int32][]byte) map[int32]string {
	out := make(map[int32]string, len(m))
	for p, v := range m {
		out[p] = string(v)
	}
	return out
}

func copyMap(m map[int32]int64) map[int32]int64 {
	if m == nil {
		return nil
	}
	out := make(map[int32]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
