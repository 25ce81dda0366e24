package console

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// latBuckets are call latency buckets: bucket i counts calls of less
// than 2^i microseconds (the last one: any longer).
const latBuckets = 32

// stageStats are one stage's counters, updated by the engine's workers.
type stageStats struct {
	calls, in, out, errs atomic.Int64
	lat                  [latBuckets]atomic.Int64

	// previous tick's values, for the rates (sampler only)
	prevCalls, prevIn, prevOut, prevErrs int64
	prevLat                              [latBuckets]int64
}

func latBucket(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 0))
	return min(bits.Len64(us), latBuckets-1)
}

// sample returns the rates since the last sample, over dt seconds.
func (s *stageStats) sample(dt float64) StageSample {
	calls, in, out, errs := s.calls.Load(), s.in.Load(), s.out.Load(), s.errs.Load()
	var lat [latBuckets]int64
	var n int64
	for i := range lat {
		v := s.lat[i].Load()
		lat[i] = v - s.prevLat[i]
		n += lat[i]
		s.prevLat[i] = v
	}
	r := func(a, b int64) float64 { return math.Round(float64(max(0, a-b))/dt*100) / 100 }
	ss := StageSample{In: r(in, s.prevIn), Out: r(out, s.prevOut), Errors: r(errs, s.prevErrs), Calls: r(calls, s.prevCalls)}
	s.prevCalls, s.prevIn, s.prevOut, s.prevErrs = calls, in, out, errs
	if n > 0 {
		ss.P50, ss.P90, ss.P99 = percentile(lat[:], n, 0.5), percentile(lat[:], n, 0.9), percentile(lat[:], n, 0.99)
	}
	return ss
}

// percentile estimates the q-quantile in milliseconds from bucket counts:
// the upper bound of the bucket it falls in (2^i µs).
func percentile(lat []int64, n int64, q float64) float64 {
	want := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i, c := range lat {
		seen += c
		if seen >= want {
			return float64(uint64(1)<<i) / 1000
		}
	}
	return float64(uint64(1)<<(len(lat)-1)) / 1000
}

// Rejection is a record the error policy got, as the pipeline page
// lists it.
type Rejection struct {
	Time      time.Time `json:"time"`
	Stage     string    `json:"stage"`
	Plugin    string    `json:"plugin,omitempty"`
	Topic     string    `json:"topic,omitempty"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Error     string    `json:"error"`
}

// lastErrorsKept is how many rejections a pipeline page shows.
const lastErrorsKept = 50

// maxErrorText bounds a rejection's error text.
const maxErrorText = 1000

// observer watches one pipeline's stages.
type observer struct {
	c      *Console
	name   string
	stages map[string]*stageStats
	order  []string // stage names in order

	taps atomic.Int32 // open taps; 0: the tap code is not reached
	mu   sync.Mutex
	open []*tap
	errs []Rejection // ring of the last rejections
	next int
	at   time.Time // last sample
}

// observer returns pipeline name's observer, made on first use with its
// stages.
func (c *Console) observer(name string, stages []string) *observer {
	c.obsMu.Lock()
	defer c.obsMu.Unlock()
	if o, ok := c.observers[name]; ok {
		return o
	}
	o := &observer{c: c, name: name, stages: map[string]*stageStats{}, order: stages, at: time.Now()}
	for _, s := range stages {
		o.stages[s] = &stageStats{}
	}
	c.observers[name] = o
	return o
}

func (c *Console) lookupObserver(name string) *observer {
	c.obsMu.Lock()
	defer c.obsMu.Unlock()
	return c.observers[name]
}

// stageCall is told of every call of a stage's Transformer: what went in,
// what came out (nil when err is the whole call's error), how long it
// took. It keeps nothing of in or out.
func (o *observer) stageCall(stage string, in []record.Record, out []plugins.Result, err error, took time.Duration) {
	st := o.stages[stage]
	if st == nil {
		return
	}
	st.calls.Add(1)
	st.in.Add(int64(len(in)))
	st.lat[latBucket(took)].Add(1)
	if err == nil {
		var n, bad int64
		for i := range out {
			if out[i].Err != nil {
				bad++
			}
			n += int64(len(out[i].Records))
		}
		st.out.Add(n)
		st.errs.Add(bad)
	}
	if o.taps.Load() == 0 {
		return
	}
	o.tapCall(stage, in, out, err, took)
}

// rejected is told of each input record the error policy gets.
func (o *observer) rejected(stage, plugin string, r *record.Record, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "…"
	}
	rj := Rejection{Time: time.Now(), Stage: stage, Plugin: plugin, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Error: msg}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.errs) < lastErrorsKept {
		o.errs = append(o.errs, rj)
		return
	}
	o.errs[o.next] = rj
	o.next = (o.next + 1) % lastErrorsKept
}

// lastErrors returns the kept rejections, oldest first.
func (o *observer) lastErrors() []Rejection {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]Rejection, 0, len(o.errs))
	out = append(out, o.errs[o.next:]...)
	return append(out, o.errs[:o.next]...)
}

// sample returns the stages' rates since the last call, in stage order.
func (o *observer) sample(now time.Time) []StageSample {
	dt := now.Sub(o.at).Seconds()
	o.at = now
	if dt <= 0 {
		return nil
	}
	out := make([]StageSample, len(o.order))
	for i, s := range o.order {
		out[i] = o.stages[s].sample(dt)
	}
	return out
}
