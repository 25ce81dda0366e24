package pipeline

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamd/streamd/plugins"
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

// Pipeline moves records from a Source through stages to a Sink.
type Pipeline struct {
	name  string
	src   Source
	sink  plugins.Sink // as given: for Readier, Conditioner, Healther, Describer
	out   AsyncSink    // the one write path (sink, or sink wrapped)
	msgs  MsgSink      // sink, if it writes Msgs (for a pipeline with no stage)
	depth int          // batches a worker may have written and not finished
	dlq   AsyncSink    // nil without a dead-letter sink
	o     options
	obs   observers
	tx    *txnState // nil unless the source runs in transactions
	eof   bool      // the source ended (set by the fetch loop)

	inflight atomic.Int64
	space    chan struct{} // signalled when in-flight drops
	stop     chan struct{} // closed on a fatal error
	stopOnce sync.Once

	lastProgress atomic.Int64 // unix ns
	shutdownAt   atomic.Int64 // unix ns: the shutdown's deadline, 0 before it starts
	n            counters
	ctl          control // pause switch (control.go)

	mu      sync.Mutex
	state   State
	err     error
	ready   bool
	trouble trouble
}

// Counts are a pipeline's running totals.
type Counts struct {
	// In is records read from the source.
	In int64 `json:"records_in"`
	// Out is records written by the sink.
	Out int64 `json:"records_out"`
	// Errors is input records rejected by a stage or the sink (the error
	// policy's records).
	Errors int64 `json:"errors"`
	// DLQ is input records written to the dead-letter sink.
	DLQ int64 `json:"dlq"`
	// Dropped is input records dropped by the error policy or because
	// their partition was revoked.
	Dropped int64 `json:"dropped"`
	// Retries is sink writes and stage calls retried after a transient
	// error.
	Retries int64 `json:"retries"`
}

// counters are a pipeline's Counts as they are counted: each event once,
// with an atomic add, read by Status.
type counters struct {
	in, out, errors, dlq, dropped, retries atomic.Int64
	// byStage counts rejections per stage; the last is the sink's.
	byStage []atomic.Int64
	// byKind counts rejections per stage (the last is the sink's) and
	// kind (in the order of Kinds).
	byKind [][5]atomic.Int64
}

func (c *counters) snapshot() Counts {
	return Counts{In: c.in.Load(), Out: c.out.Load(), Errors: c.errors.Load(), DLQ: c.dlq.Load(), Dropped: c.dropped.Load(), Retries: c.retries.Load()}
}

// SinkStage is the stage name of rejections by the sink (in
// Status.Rejected, Rejection.Stage and dead letters' streamd-stage header).
const SinkStage = "sink"

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
	// Wedged is true when the pipeline is stalled and nothing outside it
	// says why: no source, sink or dead-letter condition, the lag known,
	// and no recent error but plugin timeouts (a stage or sink that blocks
	// forever, its calls cut by the timeout and retried). A stall with an
	// outside cause, such as a broker that cannot be reached, is not
	// wedged: restarting the process would not help. systemd's watchdog
	// stops while a pipeline is wedged.
	Wedged bool `json:"wedged,omitempty"`
	// Paused is true while the pipeline is paused (Pause): it fetches
	// nothing; a paused pipeline with nothing in flight is idle.
	Paused bool `json:"paused"`
	// Reason says why the pipeline is not ready, when it is not.
	Reason string `json:"reason,omitempty"`
	// LastProgress is when a batch was last acknowledged, or the pipeline
	// last had nothing to do.
	LastProgress time.Time `json:"last_progress"`
	InFlight     int64     `json:"in_flight"`
	Lag          LagMap    `json:"lag,omitempty"`
	// Skipped is records the source skipped without reading them, per
	// "topic/partition" (a Kafka partition whose next records retention
	// deleted: see Skipper); nil when none.
	Skipped map[string]int64 `json:"skipped,omitempty"`
	// Source and Sink say what they are connected to, when they can
	// (Describer): for Kafka, the cluster and the group protocol in use.
	Source map[string]string `json:"source,omitempty"`
	Sink   map[string]string `json:"sink,omitempty"`
	// Delivery is "exactly-once" when the pipeline runs in transactions
	// (see Transactor), else "at-least-once"; Transactions counts them.
	Delivery     string        `json:"delivery"`
	Transactions *Transactions `json:"transactions,omitempty"`
	Counts
	// Rejected is Errors per stage name (SinkStage for the sink), every
	// stage listed.
	Rejected map[string]int64 `json:"rejected"`
	// ErrorKinds is Errors per plugin (the stage's name for a stage or
	// sink without one: SinkStage for the sink) and kind (KindRejected,
	// KindTrap, ...); only kinds that happened are listed.
	ErrorKinds map[string]map[string]int64 `json:"error_kinds,omitempty"`
	// ReloadRefused lists the stages (and the sink) whose plugin file
	// holds a new version that a hot reload refused (it did not load, or
	// is another plugin): the running version goes on (plugins.ReloadReporter).
	ReloadRefused []RefusedReload `json:"reload_refused,omitempty"`
}

// RefusedReload is a stage's refused hot reload, in Status.
type RefusedReload struct {
	// Stage is the stage's name, or SinkStage.
	Stage  string    `json:"stage"`
	Plugin string    `json:"plugin,omitempty"`
	Error  string    `json:"error"`
	At     time.Time `json:"at"`
}

// New returns a pipeline named name that reads src and writes sink. If
// sink is an AsyncSink it keeps several batches per worker in flight;
// otherwise each worker writes one batch at a time.
func New(name string, src Source, sink plugins.Sink, opts ...Option) *Pipeline {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	o.resolve()
	p := &Pipeline{name: name, src: src, sink: sink, o: o, state: StateStarting,
		space: make(chan struct{}, 1), stop: make(chan struct{}), obs: newObservers(o.observers)}
	p.tx = newTxn(src, o)
	p.out, p.depth = writePath(sink, o)
	if ms, ok := sink.(MsgSink); ok && len(o.stages) == 0 {
		p.msgs = ms
	}
	if o.dlq != nil {
		p.dlq, _ = writePath(o.dlq, o)
	}
	p.n.byStage = make([]atomic.Int64, len(o.stages)+1)
	p.n.byKind = make([][5]atomic.Int64, len(o.stages)+1)
	for _, ob := range p.obs.news {
		ob.ObserveNew(p)
	}
	if o.paused {
		p.Pause()
	}
	return p
}

// Name returns the pipeline's name.
func (p *Pipeline) Name() string { return p.name }

// Status returns a snapshot of the pipeline.
func (p *Pipeline) Status() Status {
	now := time.Now()
	p.mu.Lock()
	s := Status{Name: p.name, State: p.state, Ready: p.ready, InFlight: p.inflight.Load(), Paused: p.Paused()}
	if p.err != nil {
		s.Error = p.err.Error()
	}
	t := p.trouble
	p.mu.Unlock()
	s.Counts = p.n.snapshot()
	s.Delivery, s.Transactions = "at-least-once", p.txnStatus()
	if s.Transactions != nil {
		s.Delivery = "exactly-once"
	}
	s.Rejected = make(map[string]int64, len(p.o.stages)+1)
	for i, st := range p.o.stages {
		s.Rejected[st.Name] += p.n.byStage[i].Load()
	}
	s.Rejected[SinkStage] += p.n.byStage[len(p.o.stages)].Load()
	for i := range p.n.byKind {
		label := SinkStage
		if i < len(p.o.stages) {
			label = p.o.stages[i].Name
			if p.o.stages[i].Plugin != "" {
				label = p.o.stages[i].Plugin
			}
		}
		for k := range p.n.byKind[i] {
			if n := p.n.byKind[i][k].Load(); n > 0 {
				if s.ErrorKinds == nil {
					s.ErrorKinds = map[string]map[string]int64{}
				}
				if s.ErrorKinds[label] == nil {
					s.ErrorKinds[label] = map[string]int64{}
				}
				s.ErrorKinds[label][Kinds[k]] += n
			}
		}
	}
	s.ReloadRefused = p.refusedReloads()
	if l, ok := p.src.(Lagger); ok {
		s.Lag = l.Lag()
	}
	if sk, ok := p.src.(Skipper); ok {
		s.Skipped = sk.Skipped()
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
		s.Stalled, s.Reason, s.Wedged = p.stall(now, s.InFlight, s.Lag)
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

// refusedReloads lists the refused hot reloads of the stages and the sink.
func (p *Pipeline) refusedReloads() []RefusedReload {
	var out []RefusedReload
	add := func(stage, plugin string, part any) {
		if r, ok := part.(plugins.ReloadReporter); ok {
			if rr := r.ReloadRefused(); rr != nil {
				out = append(out, RefusedReload{Stage: stage, Plugin: plugin, Error: rr.Err.Error(), At: rr.At})
			}
		}
	}
	for _, st := range p.o.stages {
		add(st.Name, st.Plugin, st.Transformer)
	}
	add(SinkStage, "", p.sink)
	return out
}

func stageHealth(st Stage) error {
	if h, ok := st.Transformer.(plugins.Healther); ok {
		return h.Health()
	}
	return nil
}

func (p *Pipeline) health() error {
	for _, st := range p.o.stages {
		if err := stageHealth(st); err != nil {
			return fmt.Errorf("stage %s: %w", st.Name, err)
		}
	}
	if h, ok := p.sink.(plugins.Healther); ok {
		if err := h.Health(); err != nil {
			return fmt.Errorf("sink: %w", err)
		}
	}
	return nil
}

// release returns n records' room under max_in_flight.
func (p *Pipeline) release(n int) {
	p.inflight.Add(-int64(n))
	select {
	case p.space <- struct{}{}:
	default:
	}
}
