package console

import (
	"math"
	"sync"
	"time"

	"github.com/streamd/streamd/pipeline"
)

// Sample is one pipeline's state at one sampling tick; rates are per
// second over the interval since the previous tick.
type Sample struct {
	// T is the tick's time, Unix milliseconds.
	T     int64          `json:"t"`
	State pipeline.State `json:"state"`
	// In and Out are records/s read by the source and written by the
	// sink; Errors and DLQ rejected records/s and those sent to the
	// dead-letter queue.
	In     float64 `json:"in"`
	Out    float64 `json:"out"`
	Errors float64 `json:"errors"`
	DLQ    float64 `json:"dlq"`
	// Lag is the sum of the source partitions' lag; -1 while any is
	// unknown, or the source has none.
	Lag      int64 `json:"lag"`
	InFlight int64 `json:"in_flight"`
	// Stages are the transform stages' rates, in order (when the engine
	// reports them).
	Stages []StageSample `json:"stages,omitempty"`
}

// StageSample is one stage's rates over a sampling interval.
type StageSample struct {
	// In and Out are records/s into and out of the stage; Errors records/s
	// it rejected; Calls its Transform calls/s.
	In     float64 `json:"in"`
	Out    float64 `json:"out"`
	Errors float64 `json:"errors"`
	Calls  float64 `json:"calls"`
	// P50, P90 and P99 are call latency percentiles in milliseconds (0
	// without calls).
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// ring is the last n samples of one pipeline.
type ring struct {
	buf  []Sample
	next int // where the next sample goes
	full bool
	prev pipeline.Counts
	at   time.Time
}

func (r *ring) add(s Sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// since returns the samples newer than t (Unix ms), oldest first.
func (r *ring) since(t int64) []Sample {
	var out []Sample
	n, start := r.next, 0
	if r.full {
		n, start = len(r.buf), r.next
	}
	for i := range n {
		s := r.buf[(start+i)%len(r.buf)]
		if s.T > t {
			out = append(out, s)
		}
	}
	return out
}

// series holds every pipeline's ring and wakes event streams at each tick.
type series struct {
	n int

	mu    sync.Mutex
	rings map[string]*ring
	last  int64         // newest tick, Unix ms
	prev  int64         // the tick before it
	wake  chan struct{} // closed and replaced at each tick
}

func newSeries(n int) *series {
	return &series{n: max(n, 2), rings: map[string]*ring{}, wake: make(chan struct{})}
}

// record adds a sample computed from st to name's ring.
func (s *series) record(name string, now time.Time, st pipeline.Status, stages []StageSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rings[name]
	if r == nil {
		r = &ring{buf: make([]Sample, s.n), prev: st.Counts, at: now}
		s.rings[name] = r
	}
	smp := Sample{T: now.UnixMilli(), State: st.State, InFlight: st.InFlight, Lag: lagSum(st.Lag), Stages: stages}
	if dt := now.Sub(r.at).Seconds(); dt > 0 {
		rate := func(a, b int64) float64 { return math.Round(float64(max(0, a-b))/dt*100) / 100 }
		smp.In, smp.Out = rate(st.In, r.prev.In), rate(st.Out, r.prev.Out)
		smp.Errors, smp.DLQ = rate(st.Errors, r.prev.Errors), rate(st.DLQ, r.prev.DLQ)
	}
	r.prev, r.at = st.Counts, now
	r.add(smp)
}

// tick wakes the event streams after the samples of now were recorded.
func (s *series) tick(now time.Time) {
	s.mu.Lock()
	s.prev, s.last = s.last, now.UnixMilli()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// since returns every pipeline's samples newer than t, the newest tick,
// and a channel closed at the next tick.
func (s *series) since(t int64) (map[string][]Sample, int64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]Sample, len(s.rings))
	for name, r := range s.rings {
		if ss := r.since(t); len(ss) > 0 {
			out[name] = ss
		}
	}
	return out, s.last, s.wake
}

// newest returns the newest tick, the one before it and a channel closed
// at the next tick.
func (s *series) newest() (last, prev int64, wake <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.prev, s.wake
}

// between returns every pipeline's samples of ticks after a up to b.
func (s *series) between(a, b int64) map[string][]Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]Sample, len(s.rings))
	for name, r := range s.rings {
		ss := r.since(a)
		for len(ss) > 0 && ss[len(ss)-1].T > b {
			ss = ss[:len(ss)-1]
		}
		if len(ss) > 0 {
			out[name] = ss
		}
	}
	return out
}

func lagSum(m pipeline.LagMap) int64 {
	if len(m) == 0 {
		return -1
	}
	var sum int64
	for _, v := range m {
		if v < 0 {
			return -1
		}
		sum += v
	}
	return sum
}

// sample records every pipeline's state at now.
func (c *Console) sample(now time.Time) {
	for _, p := range c.o.pipelines() {
		if p.P == nil {
			continue
		}
		var stages []StageSample
		if o := c.lookupObserver(p.Name); o != nil {
			stages = o.sample(now)
		}
		c.series.record(p.Name, now, p.P.Status(), stages)
	}
	c.series.tick(now)
}
