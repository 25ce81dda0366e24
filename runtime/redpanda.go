package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime/internal/redpanda"
)

// A Redpanda data transform runs its own loop: its _start (the SDK's
// on_record_written) calls read_batch_header, which returns when there
// is a batch, then read_next_record for each of the batch's records and
// write_record for each record it makes of one, and read_batch_header
// again for the next batch; it never returns. So each instance runs its
// _start on a goroutine of its own, and read_batch_header is where the
// goroutine and Call meet: Call hands it the batch, and the guest's next
// read_batch_header hands back the results.
//
// Everything that bounds a streamd plugin's call bounds each batch the
// same way. The batch's deadline is set when the guest receives the batch
// and cleared when it asks for the next one: in between, the fuel checks
// and every host call (each of the imports above, and WASI's) stop a guest
// that runs past it, whether it spins, writes without end, or never asks
// for the next batch; the call timer closes a module without fuel checks;
// a cancelled call stops the guest the same way. What one batch writes is
// bounded (rpOutputLimit). A guest that fails (a trap, a timeout, an exit,
// its _start returning) ends its goroutine, and the instance is replaced
// as any failed instance is. Between batches the goroutine waits in
// read_batch_header, in Go code, so it holds up neither the garbage
// collector nor the daemon; closing the instance (or the module) ends it.

// rpGuest is the guest of one instance of a Redpanda data transform.
type rpGuest struct {
	inst  *instance
	fn    api.Function // _start
	name  string
	batch chan *rpBatch // Call -> read_batch_header
	quit  chan struct{} // closed by stop
	ready chan struct{} // closed at the guest's first read_batch_header
	done  chan struct{} // closed when _start has returned
	// err is why _start returned, abort why a host function stopped the
	// guest (nil: a trap, a timeout...): both set before done is closed
	// or a batch's result is sent.
	err, abort error
	// srErr is the schema registry's last refusal the guest was told of,
	// during start or the current batch: a failure that follows says it.
	srErr    error
	stopOnce sync.Once
	started  bool

	// Owned by the guest's goroutine while it runs (from start, and from
	// each batch's hand-over to its result).
	ctx   context.Context // start's, for the schema registry imports before the first batch
	cur   *rpBatch
	memo  rpMemo // the last schema registry answer, for the get call after its len call
	first bool   // read_batch_header was called
	enc   []byte // the payload of the record read last, to tell a copy of it (write)
}

// rpBatch is one batch on its way through the guest.
type rpBatch struct {
	ctx    context.Context
	recs   []record.Record
	res    []plugins.Result
	until  time.Time
	done   <-chan struct{} // the caller's, for a fueled guest
	max    int             // the largest record payload
	next   int             // records handed to the guest
	bytes  int64           // written so far (rpOutputLimit)
	limit  int64
	result chan error // the guest's next read_batch_header sends nil; a failure its error
}

// rpOverhead is what a written record counts beyond its payload toward
// rpOutputLimit, for what holding it costs.
const rpOverhead = 64

// rpOutputLimit bounds what the records a batch writes may add up to: the
// instance's memory cap, plus twice what the batch reads. A guest that
// writes more is stopped (kind memory).
func rpOutputLimit(maxPages uint32, in int64) int64 {
	return int64(maxPages)*65536 + 2*in
}

// The errors the imports return to the guest: the SDKs check only for a
// negative number, which they report as "errno".
const (
	rpErrInval  = -1 // not during a batch, an address outside memory, bytes that do not parse
	rpErrNoBufs = -2 // the guest's buffer is too small
	rpErrNoRec  = -3 // no record left in the batch
	rpErrSR     = -4 // the schema registry refused (not found, incompatible, invalid)
)

func newRPGuest(inst *instance) *rpGuest {
	return &rpGuest{
		inst:  inst,
		name:  inst.m.manifest.Name,
		fn:    inst.mod.ExportedFunction("_start"),
		batch: make(chan *rpBatch),
		quit:  make(chan struct{}),
		ready: make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// rpCall makes a host function of a method of the instance's rpGuest.
func rpCall(f func(*rpGuest, api.Module, []uint64)) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		inst := instFrom(ctx)
		if inst == nil {
			return
		}
		g, ok := inst.guest.(*rpGuest)
		if !ok {
			stack[0] = api.EncodeI32(rpErrInval)
			return
		}
		inst.stopIfOver()
		f(g, mod, stack)
	}
}

// start runs the guest's _start on its goroutine until it asks for its
// first batch, within the instantiation's deadline.
func (g *rpGuest) start(ctx context.Context) error {
	inst, m := g.inst, g.inst.m
	if g.fn == nil {
		return errors.New("no _start")
	}
	g.ctx = ctx
	armed := m.timeout > 0 && !inst.until.IsZero()
	if armed {
		inst.timer.Reset(time.Until(inst.until))
	}
	var stop func() bool
	if m.timeout >= 0 {
		if m.fueled {
			inst.done = ctx.Done()
		} else if ctx.Done() != nil {
			stop = context.AfterFunc(ctx, inst.cancelFn)
		}
	}
	g.started = true
	go g.run()
	var err error
	select {
	case <-g.ready:
	case <-g.done:
		err = g.err
	}
	fired := armed && !inst.timer.Stop()
	if stop != nil && !stop() {
		fired = true
	}
	switch {
	case err != nil:
		return fmt.Errorf("_start: %w", g.failure(ctx, err))
	case fired:
		return fmt.Errorf("_start: %w", inst.failure(errors.New("the transform became ready as it ran out of time"), true))
	}
	return nil
}

// run is the guest's goroutine: its _start, until it returns.
func (g *rpGuest) run() {
	err := g.fn.CallWithStack(g.inst.ctx, nil)
	if err == nil {
		err = errors.New("the transform's main returned: a Redpanda data transform calls on_record_written, which does not return")
	}
	g.err = err
	if b := g.cur; b != nil {
		g.cur = nil
		g.inst.endLog()
		b.result <- err
	}
	close(g.done)
}

// stop ends the guest's goroutine: one that waits for a batch ends at
// once; one still in a batch (a call that is being given up) when its
// deadline stops it, which stop waits for up to a second.
func (g *rpGuest) stop() {
	if !g.started {
		return
	}
	g.stopOnce.Do(func() { close(g.quit) })
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-g.done:
	case <-t.C:
		g.inst.m.logger.Warn("a Redpanda transform instance did not stop within 1s of being closed; it stops at its deadline")
	}
}

// fail stops the guest from a host function, for err.
func (g *rpGuest) fail(err error) {
	g.abort = err
	panic(err)
}

// failure says why the guest failed with err.
func (g *rpGuest) failure(ctx context.Context, err error) error {
	inst := g.inst
	if g.abort != nil {
		return g.abort
	}
	if inst.canceled.Load() && !inst.timedOut.Load() {
		return fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	err = inst.failure(err, inst.timedOut.Load())
	if g.srErr != nil {
		err = fmt.Errorf("%w (the schema registry had refused the transform's request: %v)", err, g.srErr)
	}
	return err
}

// process hands recs to the guest and waits for its results.
func (g *rpGuest) process(ctx context.Context, op Op, recs []record.Record) ([]plugins.Result, error) {
	inst, m := g.inst, g.inst.m
	if op != OpTransform {
		return nil, fmt.Errorf("plugin %s: %s: %w", g.name, op, ErrUnsupported)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &rpBatch{ctx: ctx, recs: recs, res: make([]plugins.Result, len(recs)), result: make(chan error, 1)}
	var in int64
	for i := range recs {
		n := redpanda.RecordSize(&recs[i])
		in += int64(n)
		b.max = max(b.max, n)
	}
	b.limit = rpOutputLimit(m.maxPages, in+int64(len(recs))*rpOverhead)
	armed := m.timeout > 0
	if armed {
		b.until = time.Now().Add(m.timeout)
		inst.timer.Reset(m.timeout)
	}
	var stop func() bool
	if m.timeout >= 0 {
		if m.fueled {
			b.done = ctx.Done()
		} else if ctx.Done() != nil {
			stop = context.AfterFunc(ctx, inst.cancelFn)
		}
	}
	var err error
	select {
	case g.batch <- b:
		err = <-b.result
	case <-g.done:
		err = fmt.Errorf("the transform had ended before the batch: %w", g.err)
	}
	fired := armed && !inst.timer.Stop()
	if stop != nil && !stop() {
		fired = true
	}
	switch {
	case err != nil:
		err = g.failure(ctx, err)
		if plugins.IsTransient(err) {
			return nil, fmt.Errorf("plugin %s: %s: %w", g.name, op, err)
		}
		return nil, fmt.Errorf("plugin %s: %s: %w: %w", g.name, op, ErrBatch, err)
	case fired:
		// The deadline or the cancellation came as the guest asked for
		// the next batch: the flags it set would stop the next one, so
		// this batch, which did run out its time, fails and the
		// instance goes.
		return nil, fmt.Errorf("plugin %s: %s: %w: %w", g.name, op, ErrBatch,
			inst.failure(errors.New("the batch ended as it ran out of time"), inst.timedOut.Load()))
	}
	return b.res, nil
}

// readBatchHeader implements read_batch_header: it ends the batch the
// guest had (its results go to Call), waits for the next one, and tells
// the guest its header; it returns the size of the batch's largest record
// payload (the buffer read_next_record needs).
func (g *rpGuest) readBatchHeader(mod api.Module, stack []uint64) {
	inst := g.inst
	if b := g.cur; b != nil {
		if b.next < len(b.recs) {
			g.fail(fmt.Errorf("%w: the transform asked for the next batch with %d of this batch's %d records not read", plugins.ErrTrap, len(b.recs)-b.next, len(b.recs)))
		}
		g.cur = nil
		inst.until, inst.done = time.Time{}, nil
		inst.endLog()
		b.result <- nil
	} else if !g.first {
		g.first = true
		inst.until, inst.done = time.Time{}, nil
		close(g.ready)
	}
	var b *rpBatch
	select {
	case b = <-g.batch:
	case <-g.quit:
		panic(sys.NewExitError(0))
	}
	g.cur, g.srErr = b, nil
	inst.until, inst.done = b.until, b.done
	inst.log.reset(len(b.recs))
	inst.sleepCut = false
	inst.memory.refused = 0
	inst.errOut.kept = inst.errOut.kept[:0]
	if g, ok := inst.tableReq.(api.MutableGlobal); ok && g.Get() != 0 {
		g.Set(0)
	}
	// The header of one Kafka record batch of the batch's records: the
	// SDKs read its record count; the rest is as a producer would send.
	first, last := &b.recs[0], &b.recs[len(b.recs)-1]
	maxTS := int64(-1)
	for i := range b.recs {
		maxTS = max(maxTS, millis(b.recs[i].Timestamp))
	}
	mem := mod.Memory()
	p := func(i int) uint32 { return uint32(stack[i]) }
	ok := mem.WriteUint64Le(p(0), uint64(first.Offset)) && // base_offset
		mem.WriteUint32Le(p(1), uint32(len(b.recs))) && // record_count
		mem.WriteUint32Le(p(2), 0) && // partition_leader_epoch
		mem.WriteUint16Le(p(3), 0) && // attributes
		mem.WriteUint32Le(p(4), uint32(int32(last.Offset-first.Offset))) && // last_offset_delta
		mem.WriteUint64Le(p(5), uint64(millis(first.Timestamp))) && // base_timestamp
		mem.WriteUint64Le(p(6), uint64(maxTS)) && // max_timestamp
		mem.WriteUint64Le(p(7), ^uint64(0)) && // producer_id -1
		mem.WriteUint16Le(p(8), ^uint16(0)) && // producer_epoch -1
		mem.WriteUint32Le(p(9), ^uint32(0)) // base_sequence -1
	if !ok {
		g.fail(fmt.Errorf("%w: read_batch_header: an address the transform gave is outside its memory", plugins.ErrTrap))
	}
	stack[0] = api.EncodeI32(int32(b.max))
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

// readNextRecord implements read_next_record(attr, timestamp, offset,
// buf, len): the batch's next record, its payload into buf.
func (g *rpGuest) readNextRecord(mod api.Module, stack []uint64) {
	b := g.cur
	if b == nil {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	if b.next >= len(b.recs) {
		stack[0] = api.EncodeI32(rpErrNoRec)
		return
	}
	attrP, tsP, offP, bufP, n := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3]), uint32(stack[4])
	r := &b.recs[b.next]
	size := redpanda.RecordSize(r)
	if uint64(size) > uint64(n) {
		stack[0] = api.EncodeI32(rpErrNoBufs)
		return
	}
	mem := mod.Memory()
	view, ok := mem.Read(bufP, uint32(size))
	if !ok {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	if out := redpanda.AppendRecord(view[:0], r); len(out) != size || (size > 0 && &out[0] != &view[0]) {
		copy(view, out)
	}
	if !mem.WriteByte(attrP, 0) || !mem.WriteUint64Le(tsP, uint64(millis(r.Timestamp))) || !mem.WriteUint64Le(offP, uint64(r.Offset)) {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	b.next++
	stack[0] = api.EncodeI32(int32(size))
}

// writeRecord implements write_record(buf, len): a record to the default
// output, made of the record the guest read last.
func (g *rpGuest) writeRecord(mod api.Module, stack []uint64) {
	stack[0] = api.EncodeI32(g.write(mod, uint32(stack[0]), uint32(stack[1]), "", false))
}

// writeRecordWithOptions implements write_record_with_options(buf, len,
// opts, opts_len): a record to the output the options name.
func (g *rpGuest) writeRecordWithOptions(mod api.Module, stack []uint64) {
	ob, ok := mod.Memory().Read(uint32(stack[2]), uint32(stack[3]))
	if !ok {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	topic, err := redpanda.DecodeOptions(ob)
	if err != nil {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	stack[0] = api.EncodeI32(g.write(mod, uint32(stack[0]), uint32(stack[1]), topic, true))
}

func (g *rpGuest) write(mod api.Module, ptr, n uint32, topic string, named bool) int32 {
	b := g.cur
	if b == nil || b.next == 0 || n > 1<<31-1 {
		return rpErrInval
	}
	payload, ok := mod.Memory().Read(ptr, n)
	if !ok {
		return rpErrInval
	}
	b.bytes += int64(n) + rpOverhead
	if b.bytes > b.limit {
		g.fail(fmt.Errorf("%w: the transform wrote %s of records for a batch of %d records (%s), more than a batch may write: twice what it reads plus %s",
			plugins.ErrMemoryLimit, bytesText(uint64(b.bytes)), len(b.recs), bytesText(uint64(b.limit-int64(g.inst.m.maxPages)*65536)/2), limitText(g.inst.m.maxPages)))
	}
	i := b.next - 1
	res := &b.res[i]
	if res.Err != nil {
		return int32(n) // rejected already: its further writes are dropped
	}
	out := ""
	if named {
		outs := g.inst.m.foreign.outputs
		switch j := slices.Index(outs, topic); {
		case j < 0:
			*res = plugins.Result{Err: &RejectError{Plugin: g.name, Reason: fmt.Sprintf(
				"the transform wrote a record to topic %q, which is not an output of this stage (its outputs: %s)", topic, strings.Join(outs, ", "))}}
			return int32(n)
		case j > 0:
			out = topic
		}
	}
	src := &b.recs[i]
	if int(n) == redpanda.RecordSize(src) {
		// A record written as it was read (an identity, a filter) is
		// the input record itself: no copy.
		g.enc = redpanda.AppendRecord(g.enc[:0], src)
		if bytes.Equal(g.enc, payload) {
			if res.Records == nil {
				res.Records = b.recs[i : i+1 : i+1]
			} else {
				res.Records = append(res.Records, *src)
			}
			if cap(g.enc) > 1<<20 {
				g.enc = nil
			}
			return g.outputName(res, out, n)
		}
	}
	key, value, headers, err := redpanda.DecodeRecord(payload)
	if err != nil {
		return rpErrInval
	}
	res.Records = append(res.Records, record.Record{Key: key, Value: value, Headers: headers,
		Timestamp: src.Timestamp, Topic: src.Topic, Partition: src.Partition, Offset: src.Offset})
	return g.outputName(res, out, n)
}

// outputName notes that res's last record goes to output out ("": the
// default) and returns n.
func (g *rpGuest) outputName(res *plugins.Result, out string, n uint32) int32 {
	if out != "" || res.Outputs != nil {
		if res.Outputs == nil {
			res.Outputs = make([]string, len(res.Records)-1, len(res.Records))
		}
		res.Outputs = append(res.Outputs, out)
	}
	return int32(n)
}
