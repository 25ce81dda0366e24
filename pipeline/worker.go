package pipeline

import (
	"context"
	"time"

	"github.com/streamd/streamd/record"
)

// worker batches what it receives, runs each batch through the stages and
// hands it to its writer, which writes batches in order, keeps up to
// p.depth of them in flight, and finishes (error policy, acknowledgement)
// them in order: a partition's records, which always come to the same
// worker, are written and acknowledged in order.
func (p *Pipeline) worker(ctx context.Context, in <-chan []Msg) {
	var (
		batch []Msg
		size  int
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	w := p.newWriter(ctx)
	defer w.close()
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		b := batch
		batch, size = nil, 0
		timer.Stop()
		pd, err := p.prepare(ctx, b)
		if err != nil {
			p.failUnlessAborted(ctx, err)
			return false
		}
		if pd == nil {
			return true
		}
		if p.o.policy == PolicyStop && len(pd.failed) > 0 {
			// The pipeline stops when this batch is finished: running
			// the next one through the stages meanwhile is wasted (and,
			// with a plugin that hangs, a timeout or more).
			w.submit(ctx, pd)
			return false
		}
		return w.submit(ctx, pd)
	}
	for {
		select {
		case msgs, ok := <-in:
			if !ok {
				flush()
				return
			}
			if len(msgs) == 0 {
				// The source has no more records at hand (dispatch):
				// no record is coming for the linger to wait for.
				if !flush() {
					return
				}
				continue
			}
			for len(msgs) > 0 {
				// A chunk that fills a batch on its own is cut into
				// batches without copying.
				if len(batch) == 0 {
					if k := p.fullBatch(msgs); k > 0 {
						batch, msgs = msgs[:k:k], msgs[k:]
						if !flush() {
							return
						}
						continue
					}
					timer.Reset(p.o.linger)
					batch = make([]Msg, 0, min(p.o.maxRecords, 1024))
				}
				m := msgs[0]
				msgs = msgs[1:]
				batch = append(batch, m)
				size += len(m.Record.Key) + len(m.Record.Value)
				if len(batch) >= p.o.maxRecords || size >= p.o.maxBytes {
					if !flush() {
						return
					}
				}
			}
		case <-timer.C:
			if !flush() {
				return
			}
		case <-p.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// fullBatch returns how many of msgs make a full batch, or 0 if they do
// not fill one.
func (p *Pipeline) fullBatch(msgs []Msg) int {
	size := 0
	for i := range msgs {
		size += len(msgs[i].Record.Key) + len(msgs[i].Record.Value)
		if i+1 >= p.o.maxRecords || size >= p.o.maxBytes {
			return i + 1
		}
	}
	return 0
}

// filterLive drops stale records (of partitions revoked since they were
// fetched); checked is false when the source has no notion of staleness.
// The returned slice shares nothing with batch when records were dropped.
func (p *Pipeline) filterLive(batch []Msg) (live []Msg, checked bool) {
	switch lv := p.src.(type) {
	case BatchLiveness:
		return lv.FilterLive(batch), true
	case Liveness:
		live = batch[:0:0]
		for i := range batch {
			if lv.Live(&batch[i]) {
				live = append(live, batch[i])
			}
		}
		return live, true
	}
	return batch, false
}

// pending is a batch between its stages and its acknowledgement.
type pending struct {
	start  time.Time
	batch  []Msg
	recs   []record.Record // sink input
	origin []int           // recs[i] came from batch[origin[i]]; nil: from batch[i]
	// direct: the sink input is batch's records themselves, written
	// through Pipeline.msgs (recs and origin are nil).
	direct bool
	failed map[int]failure // input records rejected by a stage
	// res is the sink's answer for recs, set before done is closed; the
	// writer turns it into one verdict per record (nil: written).
	done chan struct{}
	res  writeResult
}

// n is how many records pd gives the sink.
func (pd *pending) n() int {
	if pd.direct {
		return len(pd.batch)
	}
	return len(pd.recs)
}

// from is the index in batch of the sink's i-th record's input.
func (pd *pending) from(i int) int {
	if pd.direct || pd.origin == nil {
		return i
	}
	return pd.origin[i]
}

// records returns the sink input (a copy of batch's records when direct).
func (pd *pending) records() []record.Record {
	if !pd.direct {
		return pd.recs
	}
	recs := make([]record.Record, len(pd.batch))
	for i := range pd.batch {
		recs[i] = pd.batch[i].Record
	}
	return recs
}

// key is the source partition the sink's i-th record came from: the unit
// of order.
func (pd *pending) key(i int) partKey {
	r := &pd.batch[pd.from(i)].Record
	return partKey{r.Topic, r.Partition}
}
