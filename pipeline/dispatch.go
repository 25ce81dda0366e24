package pipeline

import (
	"context"
	"hash/fnv"

	"github.com/streamd/streamd/record"
)

// dispatch hands fetched records to the workers by partition. A Kafka
// fetch holds each partition's records in a few contiguous runs: each run
// goes to its worker as a sub-slice, without copying. Records whose
// partitions interleave are copied into one slice per worker instead.
//
// With drained (the source had no more records at hand) every worker is
// then told to write the batch it is filling without waiting out the
// linger (an empty chunk).
//
// It gives up when ctx (the work context) is cancelled by the shutdown
// timeout or the pipeline fails: records not handed on are never
// acknowledged.
func (p *Pipeline) dispatch(ctx context.Context, msgs []Msg, shards []chan []Msg, drained bool) bool {
	if !p.dispatchRecords(ctx, msgs, shards) {
		return false
	}
	if drained {
		for s := range shards {
			if !p.send(ctx, shards, s, nil) {
				return false
			}
		}
	}
	return true
}

// send hands b to shard s; false when the pipeline stopped or ctx ended
// first.
func (p *Pipeline) send(ctx context.Context, shards []chan []Msg, s int, b []Msg) bool {
	select {
	case shards[s] <- b:
		return true
	case <-p.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// dispatchRecords is dispatch without the drained signal.
func (p *Pipeline) dispatchRecords(ctx context.Context, msgs []Msg, shards []chan []Msg) bool {
	send := func(s int, b []Msg) bool { return p.send(ctx, shards, s, b) }
	if len(shards) == 1 {
		return send(0, msgs)
	}
	var runs [][2]int
	for start := 0; start < len(msgs) && len(runs) <= 4*len(shards); {
		end := start + 1
		r0 := &msgs[start].Record
		for end < len(msgs) && msgs[end].Record.Partition == r0.Partition && msgs[end].Record.Topic == r0.Topic {
			end++
		}
		runs = append(runs, [2]int{start, end})
		start = end
	}
	if len(runs) <= 4*len(shards) {
		for _, r := range runs {
			if !send(shard(&msgs[r[0]].Record, len(shards)), msgs[r[0]:r[1]:r[1]]) {
				return false
			}
		}
		return true
	}
	idx := make([]int, len(msgs))
	counts := make([]int, len(shards))
	for i := range msgs {
		idx[i] = shard(&msgs[i].Record, len(shards))
		counts[idx[i]]++
	}
	per := make([][]Msg, len(shards))
	for s, n := range counts {
		per[s] = make([]Msg, 0, n)
	}
	for i := range msgs {
		per[idx[i]] = append(per[idx[i]], msgs[i])
	}
	for s, b := range per {
		if len(b) > 0 && !send(s, b) {
			return false
		}
	}
	return true
}

func shard(r *record.Record, n int) int {
	h := fnv.New32a()
	h.Write([]byte(r.Topic))
	var b [4]byte
	b[0], b[1], b[2], b[3] = byte(r.Partition>>24), byte(r.Partition>>16), byte(r.Partition>>8), byte(r.Partition)
	h.Write(b[:])
	return int(h.Sum32() % uint32(n))
}
