package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// State is where a pipeline is in its life.
type State string

// The states of a pipeline.
const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	StateDraining State = "draining"
	StateDone     State = "done"    // a finite source ended and everything was written
	StateStopped  State = "stopped" // shut down on request
	StateFailed   State = "failed"
)

// Headers added to dead-letter records.
const (
	HeaderError           = "streamd-error"
	HeaderStage           = "streamd-stage"
	HeaderPlugin          = "streamd-plugin"
	HeaderSourceTopic     = "streamd-source-topic"
	HeaderSourcePartition = "streamd-source-partition"
	HeaderSourceOffset    = "streamd-source-offset"
)

// Pipeline moves records from a Source through stages to a Sink.
type Pipeline struct {
	name string
	src  Source
	sink plugins.Sink
	o    options

	inflight atomic.Int64
	space    chan struct{} // signalled when in-flight drops
	stop     chan struct{} // closed on a fatal error
	stopOnce sync.Once

	lastProgress atomic.Int64 // unix ns

	mu      sync.Mutex
	state   State
	err     error
	ready   bool
	counts  Counts
	trouble trouble
}

// Counts are a pipeline's running totals.
type Counts struct {
	In      int64 `json:"records_in"`
	Out     int64 `json:"records_out"`
	Errors  int64 `json:"errors"`
	DLQ     int64 `json:"dlq"`
	Dropped int64 `json:"dropped"`
}

// Status is a snapshot of a pipeline for /pipelines.
type Status struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	// Ready is what /readyz says: connected, not failed, every part
	// healthy, and not stalled.
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
	// Stalled is true when the pipeline has work pending and has made no
	// progress for the stall timeout (see WithStallTimeout).
	Stalled bool `json:"stalled"`
	// Reason says why the pipeline is not ready, when it is not.
	Reason string `json:"reason,omitempty"`
	// LastProgress is when a batch was last acknowledged, or the pipeline
	// last had nothing to do.
	LastProgress time.Time `json:"last_progress"`
	InFlight     int64     `json:"in_flight"`
	Lag          LagMap    `json:"lag,omitempty"`
	// Source and Sink say what they are connected to, when they can
	// (Describer): for Kafka, the cluster and the group protocol in use.
	Source map[string]string `json:"source,omitempty"`
	Sink   map[string]string `json:"sink,omitempty"`
	Counts
}

// New returns a pipeline named name that reads src and writes sink.
func New(name string, src Source, sink plugins.Sink, opts ...Option) *Pipeline {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	o.resolve()
	p := &Pipeline{name: name, src: src, sink: sink, o: o, state: StateStarting,
		space: make(chan struct{}, 1), stop: make(chan struct{})}
	if o.metrics != nil {
		o.metrics.add(p)
	}
	return p
}

// Name returns the pipeline's name.
func (p *Pipeline) Name() string { return p.name }

// Status returns a snapshot of the pipeline.
func (p *Pipeline) Status() Status {
	now := time.Now()
	p.mu.Lock()
	s := Status{Name: p.name, State: p.state, Ready: p.ready, Counts: p.counts, InFlight: p.inflight.Load()}
	if p.err != nil {
		s.Error = p.err.Error()
	}
	t := p.trouble
	p.mu.Unlock()
	if l, ok := p.src.(Lagger); ok {
		s.Lag = l.Lag()
	}
	switch s.State {
	case StateFailed:
		s.Ready, s.Reason = false, "failed: "+s.Error
	case StateStarting:
		s.Ready, s.Reason = false, errNotConnected.Error()
		if t.err != nil {
			s.Reason += ": " + t.err.Error()
		}
	case StateRunning, StateDraining:
		s.Stalled, s.Reason = p.stall(now, s.InFlight, s.Lag)
		s.Ready = s.Ready && !s.Stalled
	}
	if err := p.health(); err != nil {
		s.Ready = false
		if s.Error == "" {
			s.Error = err.Error()
		}
		if s.Reason == "" {
			s.Reason = err.Error()
		}
	}
	s.LastProgress = time.Unix(0, p.lastProgress.Load())
	if d, ok := p.src.(Describer); ok {
		s.Source = d.Describe()
	}
	if d, ok := p.sink.(Describer); ok {
		s.Sink = d.Describe()
	}
	return s
}

// Healther is implemented by stages and sinks that can be in a failed
// state, such as a native plugin that crashed too often.
type Healther interface {
	Health() error
}

func stageHealth(st Stage) error {
	if h, ok := st.Transformer.(Healther); ok {
		return h.Health()
	}
	return nil
}

func (p *Pipeline) health() error {
	for _, st := range p.o.stages {
		if h, ok := st.Transformer.(Healther); ok {
			if err := h.Health(); err != nil {
				return fmt.Errorf("stage %s: %w", st.Name, err)
			}
		}
	}
	if h, ok := p.sink.(Healther); ok {
		if err := h.Health(); err != nil {
			return fmt.Errorf("sink: %w", err)
		}
	}
	return nil
}

// Ready reports whether the source and sink are connected, the pipeline
// has not failed, no stage or sink reports itself unhealthy, and it is not
// stalled; Status().Reason says why not.
func (p *Pipeline) Ready() bool { return p.Status().Ready }

func (p *Pipeline) setState(s State) {
	p.mu.Lock()
	if p.state != StateFailed {
		p.state = s
	}
	p.mu.Unlock()
}

// fail records a fatal error and stops the pipeline.
func (p *Pipeline) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.state = StateFailed
	p.mu.Unlock()
	p.stopOnce.Do(func() { close(p.stop) })
}

// failUnlessAborted fails the pipeline with err, unless ctx (a worker's
// context) was cancelled by the shutdown timeout: work it interrupted is
// abandoned, not failed.
func (p *Pipeline) failUnlessAborted(ctx context.Context, err error) {
	if ctx.Err() == nil {
		p.fail(err)
	}
}

func (p *Pipeline) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// waitReady checks every part that can be checked, retrying until ctx ends.
func (p *Pipeline) waitReady(ctx context.Context) error {
	parts := []any{p.src, p.sink}
	if p.o.dlq != nil {
		parts = append(parts, p.o.dlq)
	}
	for _, part := range parts {
		r, ok := part.(Readier)
		if !ok {
			continue
		}
		backoff := p.o.retryInitial
		for {
			err := r.Ready(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.o.logger.Warn("not ready yet", "pipeline", p.name, "err", err)
			p.noteTrouble(err)
			if sleep(ctx, backoff) != nil {
				return ctx.Err()
			}
			backoff = min(backoff*2, p.o.retryMax)
		}
	}
	p.mu.Lock()
	p.ready = true
	p.mu.Unlock()
	return nil
}

// Run runs the pipeline until its source ends, ctx is done or it fails.
// When ctx is done it stops fetching, drains in-flight work for at most the
// shutdown timeout, commits, and returns nil. It returns the error that
// failed the pipeline, if any. Run closes the source.
func (p *Pipeline) Run(ctx context.Context) error {
	defer p.src.Close()
	log := p.o.logger.With("pipeline", p.name)
	if err := p.waitReady(ctx); err != nil {
		p.setState(StateStopped)
		return nil
	}
	p.progress()
	p.setState(StateRunning)
	log.Info("pipeline running", "stages", len(p.o.stages), "workers", p.o.workers)
	watchDone := make(chan struct{})
	defer close(watchDone)
	go p.watch(watchDone)

	// work is cancelled only when the shutdown timeout runs out: in-flight
	// batches finish writing after ctx is done.
	work, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()

	shards := make([]chan []Msg, p.o.workers)
	var wg sync.WaitGroup
	for i := range shards {
		shards[i] = make(chan []Msg, 4)
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.worker(work, shards[i])
		}()
	}
	// Periodic commits run on their own context, cancelled when Run
	// stops them: a commit blocked on an unreachable broker must not hold
	// up shutdown (the final commit below has its own bound).
	commitCtx, stopCommits := context.WithCancel(work)
	commitDone := make(chan struct{})
	go func() {
		defer close(commitDone)
		if p.o.commitInterval <= 0 {
			<-commitCtx.Done() // workers commit after every batch
			return
		}
		t := time.NewTicker(p.o.commitInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if err := p.src.Commit(commitCtx); err != nil && commitCtx.Err() == nil {
					log.Warn("commit failed", "err", err)
					p.noteTrouble(fmt.Errorf("commit: %w", err))
				}
			case <-commitCtx.Done():
				return
			}
		}
	}()

	// fetch is cancelled when ctx is done or the pipeline fails, so that a
	// fetch blocked on a quiet source (a Kafka poll) returns at once.
	fetch, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	go func() {
		select {
		case <-p.stop:
			stopFetch()
		case <-fetch.Done():
		}
	}()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	// The shutdown timeout starts when ctx is done or the pipeline fails,
	// wherever Run is blocked then (a fetch, handing records to a full
	// worker, a stuck write): once it runs out, the work context is
	// cancelled and in-flight batches are abandoned, not committed.
	var shutdownStart atomic.Int64
	go func() {
		select {
		case <-ctx.Done():
		case <-p.stop:
		case <-drained:
			return
		}
		shutdownStart.Store(time.Now().UnixNano())
		t := time.NewTimer(p.o.shutdownTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			log.Warn("shutdown timeout: abandoning in-flight batches (they are not committed)", "in_flight", p.inflight.Load(), "shutdown_timeout", p.o.shutdownTimeout)
			abort()
		case <-drained:
		}
	}()
	eof := p.fetchLoop(fetch, work, shards)
	for _, s := range shards {
		close(s)
	}
	p.setState(StateDraining)
	select {
	case <-drained: // a finite source: everything written, however long it took
	case <-work.Done():
		select {
		case <-drained:
		case <-time.After(abandonGrace):
			// A stage or sink that ignores its context: leave it behind
			// rather than hang the process.
			log.Error("workers did not stop after the shutdown timeout; leaving them", "grace", abandonGrace)
		}
	}
	stopCommits()
	<-commitDone
	// The final commit gets what is left of the shutdown timeout, at least
	// 2 s and at most 10 s.
	left := 10 * time.Second
	if t0 := shutdownStart.Load(); t0 != 0 {
		left = min(max(p.o.shutdownTimeout-time.Since(time.Unix(0, t0)), 2*time.Second), left)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), left)
	defer cancel()
	if err := p.src.Commit(cctx); err != nil {
		log.Error("final commit failed", "err", err)
		if p.failed() == nil {
			p.fail(fmt.Errorf("final commit: %w", err))
		}
	}
	if err := p.failed(); err != nil {
		log.Error("pipeline failed", "err", err)
		return err
	}
	if eof && ctx.Err() == nil {
		p.setState(StateDone)
	} else {
		p.setState(StateStopped)
	}
	log.Info("pipeline stopped", "state", p.Status().State)
	return nil
}

// abandonGrace is how long Run waits, after the shutdown timeout cancelled
// the in-flight work, for the workers to return.
const abandonGrace = 5 * time.Second

// fetchLoop fetches until the source ends (true), ctx is done or the
// pipeline fails (false).
func (p *Pipeline) fetchLoop(ctx, work context.Context, shards []chan []Msg) (eof bool) {
	for ctx.Err() == nil {
		for p.inflight.Load() >= int64(p.o.maxInFlight) {
			select {
			case <-p.space:
			case <-ctx.Done():
				return false
			case <-p.stop:
				return false
			}
		}
		var msgs []Msg
		var err error
		if bs, ok := p.src.(BoundedSource); ok {
			msgs, err = bs.FetchUpTo(ctx, p.o.maxInFlight-int(p.inflight.Load()))
		} else {
			msgs, err = p.src.Fetch(ctx)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return true
			}
			if ctx.Err() != nil {
				return false
			}
			p.fail(fmt.Errorf("source: %w", err))
			return false
		}
		if len(msgs) == 0 {
			continue
		}
		p.inflight.Add(int64(len(msgs)))
		p.count(func(c *Counts) { c.In += int64(len(msgs)) })
		if m := p.o.metrics; m != nil {
			m.in.WithLabelValues(p.name).Add(float64(len(msgs)))
			m.inflight.WithLabelValues(p.name).Set(float64(p.inflight.Load()))
		}
		if !p.dispatch(work, msgs, shards) {
			return false
		}
	}
	return false
}

// dispatch hands fetched records to the workers by partition. A Kafka
// fetch holds each partition's records in a few contiguous runs: each run
// goes to its worker as a sub-slice, without copying. Records whose
// partitions interleave are copied into one slice per worker instead.
//
// It gives up when ctx (the work context) is cancelled by the shutdown
// timeout or the pipeline fails: records not handed on are never
// acknowledged.
func (p *Pipeline) dispatch(ctx context.Context, msgs []Msg, shards []chan []Msg) bool {
	send := func(s int, b []Msg) bool {
		select {
		case shards[s] <- b:
			return true
		case <-p.stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
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

func (p *Pipeline) count(f func(*Counts)) {
	p.mu.Lock()
	f(&p.counts)
	p.mu.Unlock()
}

// writeDepth is how many batches a worker may have written but not yet
// acknowledged when the sink is an AsyncSink: as many as max_in_flight
// allows, since that already bounds what is between fetch and ack.
func (p *Pipeline) writeDepth() int { return max(8, p.o.maxInFlight/p.o.maxRecords+1) }

// worker batches what it receives and processes batches one at a time, so
// a partition's records are written and acknowledged in order. With an
// AsyncSink it starts writing the next batch while earlier ones are still
// in flight; a completer acknowledges them in order.
func (p *Pipeline) worker(ctx context.Context, in <-chan []Msg) {
	var (
		batch []Msg
		size  int
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	async, _ := p.sink.(AsyncSink)
	var queue chan *pending
	completed := make(chan struct{})
	if async != nil {
		queue = make(chan *pending, p.writeDepth())
		go func() {
			defer close(completed)
			for pd := range queue {
				select {
				case <-pd.done:
				case <-ctx.Done(): // the shutdown timeout ran out: acknowledge nothing more
					for range queue {
					}
					return
				}
				if len(pd.recs) > 0 { // retries what is not written yet, in place
					pd.errs, pd.err = p.deliver(ctx, p.sink, pd.recs, "sink", &writeResult{pd.errs, pd.err})
				}
				if pd.err == nil {
					pd.err = p.finish(ctx, pd)
				}
				if pd.err != nil {
					p.failUnlessAborted(ctx, pd.err)
					for range queue { // acknowledge nothing after a failure
					}
					return
				}
			}
		}()
	} else {
		close(completed)
	}
	defer func() {
		if queue != nil {
			close(queue)
		}
		<-completed
	}()
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		b := batch
		batch, size = nil, 0
		timer.Stop()
		if async == nil {
			if err := p.process(ctx, b); err != nil {
				p.failUnlessAborted(ctx, err)
				return false
			}
			return true
		}
		pd, err := p.prepare(ctx, b)
		if err != nil {
			p.failUnlessAborted(ctx, err)
			return false
		}
		if pd == nil {
			return true
		}
		pd.done = make(chan struct{})
		if len(pd.recs) == 0 {
			close(pd.done)
		} else {
			async.WriteAsync(ctx, pd.recs, func(errs []error, err error) {
				pd.errs, pd.err = errs, err
				close(pd.done)
			})
		}
		select {
		case queue <- pd:
			return true
		case <-p.stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
	for {
		select {
		case msgs, ok := <-in:
			if !ok {
				flush()
				return
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

// failure is why an input record was rejected.
type failure struct {
	stage, plugin string
	err           error
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
	origin []int           // recs[i] came from batch[origin[i]]
	failed map[int]failure
	// set by the sink write; done is closed when they are
	done chan struct{}
	errs []error
	err  error
}

// process runs one batch through the stages and the sink, applies the
// error policy, and acknowledges it. An error is fatal for the pipeline.
func (p *Pipeline) process(ctx context.Context, batch []Msg) error {
	pd, err := p.prepare(ctx, batch)
	if err != nil || pd == nil {
		return err
	}
	if len(pd.recs) > 0 {
		pd.errs, pd.err = p.deliver(ctx, p.sink, pd.recs, "sink", nil)
		if pd.err != nil {
			return pd.err
		}
	}
	return p.finish(ctx, pd)
}

// prepare drops stale records and runs the stages; nil means nothing is
// left to do.
func (p *Pipeline) prepare(ctx context.Context, batch []Msg) (*pending, error) {
	start := time.Now()
	if live, checked := p.filterLive(batch); checked {
		if dropped := len(batch) - len(live); dropped > 0 {
			p.release(dropped)
			p.count(func(c *Counts) { c.Dropped += int64(dropped) })
			if m := p.o.metrics; m != nil {
				m.dropped.WithLabelValues(p.name).Add(float64(dropped))
			}
			p.o.logger.Debug("dropped records of a revoked partition", "pipeline", p.name, "n", dropped)
		}
		batch = live
		if len(batch) == 0 {
			return nil, nil
		}
	}

	recs := make([]record.Record, len(batch))
	origin := make([]int, len(batch))
	for i := range batch {
		recs[i] = batch[i].Record
		origin[i] = i
	}
	var failed map[int]failure // allocated on the first failure
	for _, st := range p.o.stages {
		results, err := p.transform(ctx, st, recs)
		if err != nil {
			return nil, err
		}
		var next []record.Record
		var nextOrigin []int
		for i, r := range results {
			o := origin[i]
			if _, bad := failed[o]; bad {
				continue
			}
			if r.Err != nil {
				if failed == nil {
					failed = map[int]failure{}
				}
				failed[o] = failure{stage: st.Name, plugin: st.Plugin, err: r.Err}
				continue
			}
			for _, out := range r.Records {
				next = append(next, out)
				nextOrigin = append(nextOrigin, o)
			}
		}
		recs, origin = next, nextOrigin
	}
	// Outputs of an input that failed anywhere are withheld: the input goes
	// to the error policy whole.
	if len(failed) > 0 {
		keep := recs[:0:0]
		var keepOrigin []int
		for i := range recs {
			if _, bad := failed[origin[i]]; !bad {
				keep = append(keep, recs[i])
				keepOrigin = append(keepOrigin, origin[i])
			}
		}
		recs, origin = keep, keepOrigin
	}
	return &pending{start: start, batch: batch, recs: recs, origin: origin, failed: failed}, nil
}

// finish takes the sink's answer for pd, applies the error policy and
// acknowledges the batch.
func (p *Pipeline) finish(ctx context.Context, pd *pending) error {
	batch, failed, start := pd.batch, pd.failed, pd.start
	written := 0
	for i, e := range pd.errs {
		if e == nil {
			written++
			continue
		}
		if _, bad := failed[pd.origin[i]]; !bad {
			if failed == nil {
				failed = map[int]failure{}
			}
			failed[pd.origin[i]] = failure{stage: "sink", err: e}
		}
	}
	if err := p.handleFailures(ctx, batch, failed); err != nil {
		return err
	}
	p.src.Ack(batch)
	p.progress()
	if p.o.commitInterval <= 0 {
		if err := p.src.Commit(ctx); err != nil {
			p.o.logger.Warn("commit failed", "pipeline", p.name, "err", err)
		}
	}
	p.release(len(batch))
	p.count(func(c *Counts) { c.Out += int64(written) })
	if m := p.o.metrics; m != nil {
		m.out.WithLabelValues(p.name).Add(float64(written))
		m.batch.WithLabelValues(p.name).Observe(time.Since(start).Seconds())
		m.inflight.WithLabelValues(p.name).Set(float64(p.inflight.Load()))
	}
	return nil
}

func (p *Pipeline) release(n int) {
	p.inflight.Add(-int64(n))
	select {
	case p.space <- struct{}{}:
	default:
	}
}

// transform runs recs through st: one Result per record, or an error that
// fails the pipeline. A batch error marked plugins.Transient retries the
// batch; any other batch error runs the records one by one so that only a
// poison record fails. A Result whose Err is transient retries that
// record. Retries back off as sink writes do, until ctx is done or
// retry_attempts is used up.
func (p *Pipeline) transform(ctx context.Context, st Stage, recs []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(recs))
	todo := recs
	var idx []int // todo[i] is recs[idx[i]]; nil: todo is recs
	backoff := p.o.retryInitial
	for attempt := 1; ; attempt++ {
		res, err := st.Transformer.Transform(ctx, todo)
		if err == nil && len(res) != len(todo) {
			err = fmt.Errorf("stage returned %d results for %d records", len(res), len(todo))
		}
		if err != nil && !errors.Is(err, plugins.ErrTransient) {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("stage %s: %w", st.Name, err)
			}
			if herr := stageHealth(st); herr != nil {
				// A broken plugin fails every record: that is not the
				// records' fault, so nothing goes to the error policy.
				return nil, fmt.Errorf("stage %s: %w (batch error: %v)", st.Name, herr, err)
			}
			p.o.logger.Warn("batch failed; retrying its records one by one", "pipeline", p.name, "stage", st.Name, "records", len(todo), "err", err)
			if res, err = p.isolate(ctx, st, todo); err != nil {
				return nil, err
			}
		}
		cause := err // transient batch error, or nil
		if cause == nil {
			var next []record.Record
			var nextIdx []int
			for i := range res {
				j := i
				if idx != nil {
					j = idx[i]
				}
				if res[i].Err != nil && errors.Is(res[i].Err, plugins.ErrTransient) {
					if cause == nil {
						cause = res[i].Err
					}
					next = append(next, todo[i])
					nextIdx = append(nextIdx, j)
					continue
				}
				out[j] = res[i]
			}
			if cause == nil {
				return out, nil
			}
			todo, idx = next, nextIdx
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("stage %s: %w", st.Name, cause)
		}
		if p.o.retryAttempts > 0 && attempt >= p.o.retryAttempts {
			return nil, fmt.Errorf("stage %s failed after %d attempts: %w", st.Name, attempt, cause)
		}
		p.noteRetry("stage "+st.Name, len(todo), attempt, backoff, cause)
		if sleep(ctx, backoff) != nil {
			return nil, fmt.Errorf("stage %s: %w", st.Name, cause)
		}
		backoff = min(backoff*2, p.o.retryMax)
	}
}

// isolate runs a failed batch's records one at a time, so that only the
// poison record fails. A record that fails transiently alone gets a
// transient Result.Err, which transform retries.
func (p *Pipeline) isolate(ctx context.Context, st Stage, recs []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(recs))
	for i := range recs {
		res, err := st.Transformer.Transform(ctx, recs[i:i+1])
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("stage %s: %w", st.Name, err)
			}
			if herr := stageHealth(st); herr != nil {
				return nil, fmt.Errorf("stage %s: %w (record error: %v)", st.Name, herr, err)
			}
			out[i] = plugins.Result{Err: err}
		case len(res) != 1:
			out[i] = plugins.Result{Err: fmt.Errorf("stage returned %d results for 1 record", len(res))}
		default:
			out[i] = res[0]
		}
	}
	return out, nil
}

// writeResult is what a sink answered for a batch.
type writeResult struct {
	errs []error
	err  error
}

// deliver writes recs to sink until every record is written or has the
// sink's verdict (a per-record error not marked plugins.Transient), and returns
// the verdicts (nil where written). A whole-batch error retries the
// records not yet written; a plugins.Transient per-record error retries that
// record only: records already written are never sent again. Retries back
// off exponentially, capped at retry_max, until ctx is done or
// retry_attempts (0: no limit) is used up, which is the only error
// returned. first, if not nil, is the answer to a first attempt the caller
// made itself (an AsyncSink write).
func (p *Pipeline) deliver(ctx context.Context, sink plugins.Sink, recs []record.Record, what string, first *writeResult) ([]error, error) {
	final := make([]error, len(recs))
	todo := recs
	var idx []int // todo[i] is recs[idx[i]]; nil: todo is recs
	backoff := p.o.retryInitial
	for attempt := 1; ; attempt++ {
		var res writeResult
		if attempt == 1 && first != nil {
			res = *first
		} else {
			res.errs, res.err = sink.Write(ctx, todo)
		}
		if res.err == nil && len(res.errs) != len(todo) {
			return nil, fmt.Errorf("%s returned %d results for %d records", what, len(res.errs), len(todo))
		}
		cause := res.err
		if cause == nil {
			var next []record.Record
			var nextIdx []int
			for i, e := range res.errs {
				if e == nil {
					continue
				}
				j := i
				if idx != nil {
					j = idx[i]
				}
				if !errors.Is(e, plugins.ErrTransient) {
					final[j] = e
					continue
				}
				if cause == nil {
					cause = e
				}
				next = append(next, todo[i])
				nextIdx = append(nextIdx, j)
			}
			if cause == nil {
				return final, nil
			}
			todo, idx = next, nextIdx
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", what, cause)
		}
		if p.o.retryAttempts > 0 && attempt >= p.o.retryAttempts {
			return nil, fmt.Errorf("%s failed after %d attempts: %w", what, attempt, cause)
		}
		p.noteRetry(what, len(todo), attempt, backoff, cause)
		if sleep(ctx, backoff) != nil {
			return nil, fmt.Errorf("%s: %w", what, cause)
		}
		backoff = min(backoff*2, p.o.retryMax)
	}
}

// noteRetry logs and counts a retried write.
func (p *Pipeline) noteRetry(what string, n, attempt int, backoff time.Duration, err error) {
	p.o.logger.Warn("write failed; retrying", "pipeline", p.name, "to", what, "records", n, "attempt", attempt, "backoff", backoff, "err", err)
	p.noteTrouble(fmt.Errorf("%s: %w", what, err))
	if m := p.o.metrics; m != nil {
		m.retries.WithLabelValues(p.name).Inc()
	}
}

// handleFailures applies the error policy to the rejected input records.
func (p *Pipeline) handleFailures(ctx context.Context, batch []Msg, failed map[int]failure) error {
	if len(failed) == 0 {
		return nil
	}
	idx := make([]int, 0, len(failed))
	for i := range batch {
		if _, ok := failed[i]; ok {
			idx = append(idx, i)
		}
	}
	for _, i := range idx {
		f := failed[i]
		r := &batch[i].Record
		p.count(func(c *Counts) { c.Errors++ })
		if m := p.o.metrics; m != nil {
			m.errors.WithLabelValues(p.name, f.stage).Inc()
		}
		p.o.logger.Warn("record rejected", "pipeline", p.name, "stage", f.stage, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", f.err)
	}
	switch p.o.policy {
	case PolicyStop:
		f := failed[idx[0]]
		r := &batch[idx[0]].Record
		return fmt.Errorf("record %s/%d@%d rejected by %s: %w (error policy: stop)", r.Topic, r.Partition, r.Offset, f.stage, f.err)
	case PolicyDrop:
		p.count(func(c *Counts) { c.Dropped += int64(len(idx)) })
		if m := p.o.metrics; m != nil {
			m.dropped.WithLabelValues(p.name).Add(float64(len(idx)))
		}
		return nil
	}
	dead := make([]record.Record, 0, len(idx))
	for _, i := range idx {
		dead = append(dead, DeadLetter(batch[i].Record, failed[i].stage, failed[i].plugin, failed[i].err))
	}
	// A dead letter the DLQ finds too large (the input was too large for
	// the sink, and the DLQ has the same limit) is sent again without its
	// value, then also without its key and own headers: the error and
	// where the record came from are never lost to a size limit.
	todo := make([]int, len(dead)) // dead[todo[k]] still to write
	for k := range todo {
		todo[k] = k
	}
	for level := 0; len(todo) > 0; level++ {
		recs := make([]record.Record, len(todo))
		for k, j := range todo {
			recs[k] = dead[j]
		}
		errs, err := p.deliver(ctx, p.o.dlq, recs, "dlq", nil)
		if err != nil {
			return err
		}
		var again []int
		for k, e := range errs {
			if e == nil {
				continue
			}
			j := todo[k]
			r := &batch[idx[j]].Record
			if errors.Is(e, plugins.ErrRecordTooLarge) && level < 2 {
				p.o.logger.Warn("dead letter too large; sending it truncated", "pipeline", p.name, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
					"drop", []string{"value", "value, key and headers"}[level], "err", e)
				dead[j] = truncateDeadLetter(dead[j], level)
				again = append(again, j)
				continue
			}
			return fmt.Errorf("dead-letter write of %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, e)
		}
		todo = again
	}
	p.count(func(c *Counts) { c.DLQ += int64(len(dead)) })
	if m := p.o.metrics; m != nil {
		m.dlq.WithLabelValues(p.name).Add(float64(len(dead)))
	}
	return nil
}

// Headers of a dead letter that was too large for the dead-letter queue.
const (
	// HeaderTruncated lists what was left out: "value" or "value,key,headers".
	HeaderTruncated = "streamd-truncated"
	// HeaderValueBytes is the length of the value left out.
	HeaderValueBytes = "streamd-value-bytes"
	// HeaderKeyBytes is the length of the key left out.
	HeaderKeyBytes = "streamd-key-bytes"
)

// truncateDeadLetter drops a dead letter's value (level 0), or also its key
// and the input's own headers (level 1), saying so in headers.
func truncateDeadLetter(d record.Record, level int) record.Record {
	if level == 0 {
		d.SetHeader(HeaderValueBytes, []byte(strconv.Itoa(len(d.Value))))
		d.SetHeader(HeaderTruncated, []byte("value"))
		d.Value = nil
		return d
	}
	keep := make([]record.Header, 0, 10)
	for _, h := range d.Headers {
		if strings.HasPrefix(h.Key, "streamd-") {
			keep = append(keep, h)
		}
	}
	d.Headers = keep
	d.SetHeader(HeaderKeyBytes, []byte(strconv.Itoa(len(d.Key))))
	d.SetHeader(HeaderTruncated, []byte("value,key,headers"))
	d.Key = nil
	return d
}

// maxErrorHeader bounds the streamd-error header of a dead letter.
const maxErrorHeader = 4096

// DeadLetter returns the dead-letter record for in: its key, value and
// headers, plus headers saying why (the error, at most 4 KiB of it) and
// where it came from.
func DeadLetter(in record.Record, stage, plugin string, err error) record.Record {
	out := in.Clone()
	out.Topic, out.Offset = "", -1
	msg := err.Error()
	if len(msg) > maxErrorHeader {
		msg = msg[:maxErrorHeader-3] + "..."
	}
	out.SetHeader(HeaderError, []byte(msg))
	out.SetHeader(HeaderStage, []byte(stage))
	if plugin != "" {
		out.SetHeader(HeaderPlugin, []byte(plugin))
	}
	out.SetHeader(HeaderSourceTopic, []byte(in.Topic))
	out.SetHeader(HeaderSourcePartition, []byte(strconv.Itoa(int(in.Partition))))
	out.SetHeader(HeaderSourceOffset, []byte(strconv.FormatInt(in.Offset, 10)))
	return out
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
