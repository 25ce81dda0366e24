package runtime

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime/internal/fluvio"
)

// A Fluvio SmartModule is called once per group of records: the host asks
// the guest's alloc for room, writes the input there (the records, their
// base offset and timestamp, and the params), and calls the SmartModule's
// export, which frees the input, and hands its output to env.copy_records
// before it returns the number of records it kept. The guest leaves the
// output's memory to the host, which frees it with the guest's dealloc
// once it has copied it.
//
// A SmartModule's output says which input each record came from only by
// its offset delta, so records go to it in groups whose offsets rise
// strictly within one partition (a group's base offset is its first
// record's offset, each record's delta its distance from it): filter,
// map and filter_map keep each record's delta. array_map makes new
// records, which carry none, so it is given one record at a time. A
// SmartModule stops at the first record it fails on and reports it (its
// offset, and a hint): that record is rejected with the hint, and the
// records after it go to the SmartModule again. One deadline bounds the
// whole call, whatever the number of groups.

// flGuest is the guest of one instance of a Fluvio SmartModule.
type flGuest struct {
	inst                    *instance
	kind                    string
	fn, alloc, dealloc, ini api.Function
	buf                     []byte
	in                      fluvio.Input
	stack                   [3]uint64
}

func newFLGuest(inst *instance) *flGuest {
	m := inst.m
	mod := inst.mod
	return &flGuest{
		inst:    inst,
		kind:    m.abi.Kind,
		fn:      mod.ExportedFunction(m.abi.Kind),
		alloc:   mod.ExportedFunction("alloc"),
		dealloc: mod.ExportedFunction("dealloc"),
		ini:     mod.ExportedFunction("init"),
	}
}

// SmartModule statuses below 0, as fluvio-smartmodule returns them.
func flStatus(st int32) string {
	switch st {
	case -1:
		return "an unknown error"
	case -11:
		return "failed to decode its input"
	case -22:
		return "failed to decode its input's records"
	case -33:
		return "failed to encode its output"
	case -44:
		return "failed to parse its params"
	case -55:
		return "undefined right record (join)"
	}
	return "an error"
}

func (g *flGuest) stop() {}

// start calls the SmartModule's init with the stage's params, if it has
// one.
func (g *flGuest) start(ctx context.Context) error {
	if g.ini == nil {
		return nil
	}
	g.buf = fluvio.AppendParams(g.buf[:0], g.inst.m.foreign.params)
	st, reply, err := g.call(ctx, g.ini, g.buf)
	switch {
	case err != nil:
		return fmt.Errorf("init: %w", err)
	case st == -2: // InitError: the output holds its hint
		hint, derr := fluvio.DecodeInitError(reply)
		if derr != nil {
			return fmt.Errorf("init refused its params: %v (and its error does not parse: %w)", g.inst.m.foreign.params, derr)
		}
		return fmt.Errorf("init refused its params %v: %s", g.inst.m.foreign.params, hint)
	case st != 0:
		return fmt.Errorf("init failed with status %d", st)
	}
	return nil
}

// call runs fn on input: alloc, then fn(ptr, len, version). It returns
// fn's status and the bytes the guest handed copy_records (a copy), and
// frees them in the guest.
func (g *flGuest) call(ctx context.Context, fn api.Function, input []byte) (int32, []byte, error) {
	inst := g.inst
	g.stack[0] = uint64(len(input))
	if err := inst.invokeStack(ctx, g.alloc, g.stack[:]); err != nil {
		return 0, nil, fmt.Errorf("alloc(%d): %w", len(input), err)
	}
	ptr := uint32(g.stack[0])
	if ptr == 0 || !inst.mem.Write(ptr, input) {
		err := fmt.Errorf("alloc(%d) returned %#x, outside its memory (%d bytes)", len(input), ptr, inst.mem.Size())
		if inst.limited() {
			err = inst.failure(err, false)
		}
		return 0, nil, err
	}
	inst.reply, inst.replyErr, inst.replied = nil, nil, false
	inst.replyPtr, inst.replyLen = 0, 0
	g.stack[0], g.stack[1], g.stack[2] = uint64(ptr), uint64(len(input)), fluvio.Version
	if err := inst.invokeStack(ctx, fn, g.stack[:]); err != nil {
		return 0, nil, err
	}
	st := api.DecodeI32(g.stack[0])
	if inst.replyErr != nil {
		return 0, nil, inst.replyErr
	}
	reply := inst.reply
	inst.reply = nil
	if inst.replied && g.dealloc != nil && inst.replyLen > 0 {
		g.stack[0], g.stack[1] = uint64(inst.replyPtr), uint64(inst.replyLen)
		if err := inst.invokeStack(ctx, g.dealloc, g.stack[:]); err != nil {
			return 0, nil, fmt.Errorf("dealloc of its output: %w", err)
		}
	}
	return st, reply, nil
}

// hostCopyRecords implements env.copy_records(ptr, len): the guest hands
// the host its output, which the host copies.
func hostCopyRecords(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instFrom(ctx)
	if inst == nil {
		return
	}
	inst.stopIfOver()
	ptr, n := uint32(stack[0]), uint32(stack[1])
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		inst.replyErr = fmt.Errorf("copy_records(%#x, %d) is outside guest memory (%d bytes)", ptr, n, mod.Memory().Size())
		return
	}
	// A new buffer each time: the output records are slices of it.
	inst.reply = append([]byte(nil), b...)
	inst.replyPtr, inst.replyLen = ptr, n
	inst.replied = true
}

// flOffset is the offset a record has for a SmartModule: its own, or, for
// a record read from no partition (offset -1), its index in the batch.
func flOffset(recs []record.Record, i int) int64 {
	if recs[i].Offset >= 0 {
		return recs[i].Offset
	}
	return int64(i)
}

// maxDelta bounds a group's offset and timestamp deltas: Fluvio's encoder
// of a record's varints is exact only for values that fit 31 bits.
const maxDelta = 1 << 30

// groupEnd returns the end of the group of records that starts at i.
func (g *flGuest) groupEnd(recs []record.Record, i int) int {
	if g.kind == "array_map" {
		return i + 1
	}
	first := &recs[i]
	base, baseTS := flOffset(recs, i), millis(first.Timestamp)
	prev := base
	j := i + 1
	for ; j < len(recs); j++ {
		r := &recs[j]
		off := flOffset(recs, j)
		d := millis(r.Timestamp) - baseTS
		if r.Topic != first.Topic || r.Partition != first.Partition || off <= prev || off-base >= maxDelta || d >= maxDelta || d <= -maxDelta {
			break
		}
		prev = off
	}
	return j
}

func (g *flGuest) process(ctx context.Context, op Op, recs []record.Record) ([]plugins.Result, error) {
	inst, m := g.inst, g.inst.m
	name := m.manifest.Name
	if op != OpTransform {
		return nil, fmt.Errorf("plugin %s: %s: %w", name, op, ErrUnsupported)
	}
	// One deadline for the whole call, every group and every retry after
	// a rejected record included.
	if m.timeout > 0 {
		inst.until = time.Now().Add(m.timeout)
		defer func() { inst.until = time.Time{} }()
	}
	if tg, ok := inst.tableReq.(api.MutableGlobal); ok && tg.Get() != 0 {
		tg.Set(0)
	}
	inst.log.reset(len(recs))
	defer inst.endLog()
	res := make([]plugins.Result, len(recs))
	for i := 0; i < len(recs); {
		end := g.groupEnd(recs, i)
		next, err := g.group(ctx, recs, i, end, res)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %s: %w: %w", name, op, ErrBatch, err)
		}
		i = next
	}
	return res, nil
}

// group runs recs[i:end] and fills their results; it returns where the
// next group starts: end, or the record after the one the SmartModule
// failed on.
func (g *flGuest) group(ctx context.Context, recs []record.Record, i, end int, res []plugins.Result) (int, error) {
	first := &recs[i]
	in := &g.in
	in.BaseOffset, in.BaseTimestamp = flOffset(recs, i), millis(first.Timestamp)
	in.Params = g.inst.m.foreign.params
	in.Records = in.Records[:0]
	deltas := make([]int64, 0, end-i)
	for j := i; j < end; j++ {
		r := &recs[j]
		d := flOffset(recs, j) - in.BaseOffset
		deltas = append(deltas, d)
		value := r.Value
		if value == nil {
			value = []byte{}
		}
		in.Records = append(in.Records, fluvio.Record{OffsetDelta: d, TimestampDelta: millis(r.Timestamp) - in.BaseTimestamp, Key: r.Key, Value: value})
	}
	g.buf = fluvio.AppendInput(g.buf[:0], in)
	st, reply, err := g.call(ctx, g.fn, g.buf)
	if err != nil {
		return 0, err
	}
	if st < 0 {
		return 0, fmt.Errorf("the SmartModule's %s %s (status %d)", g.kind, flStatus(st), st)
	}
	if !g.inst.replied {
		return 0, fmt.Errorf("the SmartModule's %s returned %d without handing its output to copy_records", g.kind, st)
	}
	out, err := fluvio.DecodeOutput(reply)
	if err != nil {
		return 0, fmt.Errorf("the SmartModule's output: %w", err)
	}
	if int(st) != len(out.Records) {
		return 0, fmt.Errorf("the SmartModule's %s returned %d but its output has %d records", g.kind, st, len(out.Records))
	}
	// Which input each output record came from: its offset delta (or,
	// for array_map, the one input).
	at := func(d int64) int {
		k := sort.Search(len(deltas), func(k int) bool { return deltas[k] >= d })
		if k == len(deltas) || deltas[k] != d {
			return -1
		}
		return i + k
	}
	last := i
	for k := range out.Records {
		o := &out.Records[k]
		j := i
		if g.kind != "array_map" {
			if j = at(o.OffsetDelta); j < last {
				return 0, fmt.Errorf("the SmartModule's output record %d has offset delta %d, which is no record of its input after the one before it", k, o.OffsetDelta)
			}
		}
		last = j
		src := &recs[j]
		if g.kind == "filter" {
			// A filter keeps a record or not; the record kept is the
			// input, as it was (a tombstone stays one).
			res[j].Records = recs[j : j+1 : j+1]
			continue
		}
		res[j].Records = append(res[j].Records, record.Record{Key: o.Key, Value: o.Value, Headers: src.Headers,
			Timestamp: src.Timestamp, Topic: src.Topic, Partition: src.Partition, Offset: src.Offset})
	}
	if e := out.Err; e != nil {
		j := at(e.Offset - in.BaseOffset)
		if j < last {
			return 0, fmt.Errorf("the SmartModule reported an error for offset %d, which is no record of its input at or after its last output: %s", e.Offset, e.Hint)
		}
		res[j] = plugins.Result{Err: &RejectError{Plugin: g.inst.m.manifest.Name, Reason: fmt.Sprintf("fluvio smartmodule %s: %s", fluvio.Kind(e.Kind), e.Hint)}}
		return j + 1, nil
	}
	return end, nil
}
