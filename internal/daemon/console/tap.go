package console

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamd/streamd/internal/daemon/admin"
	"github.com/streamd/streamd/internal/daemon/defaults"
	"github.com/streamd/streamd/internal/daemon/recview"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// TapLimits bound what a tap may ask for.
type TapLimits struct {
	// Rate is the most records per second one tap samples.
	Rate float64 `json:"rate"`
	// ValueBytes is where keys, values and headers are cut.
	ValueBytes int `json:"value_bytes"`
	// Open is how many taps may be open at once in the daemon.
	Open int `json:"open"`
}

// Default tap limits (from internal/daemon/defaults, which the config
// reads without importing this server).
const (
	DefaultTapRate       = defaults.TapRate
	DefaultTapValueBytes = defaults.TapValueBytes
	DefaultTapOpen       = defaults.TapOpen
)

// TapEvent is one sampled record of a tapped stage: what went in and
// what came out of that call for it.
type TapEvent struct {
	Time  time.Time `json:"time"`
	Stage string    `json:"stage"`
	// In is the record the stage received.
	In recview.Record `json:"in"`
	// Out are the records it returned for it (none: it dropped the
	// record), unless Err says it rejected it.
	Out []recview.Record `json:"out"`
	Err string           `json:"error,omitempty"`
	// CallErr is set when the whole call failed (the engine then retries
	// the records one by one, which the tap shows as calls of their own).
	CallErr string `json:"call_error,omitempty"`
	// Batch is how many records the call had; TookMS how long it took.
	Batch  int     `json:"batch"`
	TookMS float64 `json:"took_ms"`
}

// tap is one open tap.
type tap struct {
	stage string // "" = every stage
	rate  float64
	bytes int
	ch    chan TapEvent

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped atomic.Int64 // events not sent: the client was too slow
	skipped atomic.Int64 // records not sampled: over the rate
}

// take returns how many of n records the tap may sample now.
func (t *tap) take(now time.Time, n int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = min(t.rate, t.tokens+now.Sub(t.last).Seconds()*t.rate)
	t.last = now
	k := min(n, int(t.tokens))
	t.tokens -= float64(k)
	return k
}

// tapCall samples a call for the open taps of its stage.
func (o *observer) tapCall(stage string, in []record.Record, out []plugins.Result, err error, took time.Duration) {
	o.mu.Lock()
	taps := slices.Clone(o.open)
	o.mu.Unlock()
	now := time.Now()
	for _, t := range taps {
		if t.stage != "" && t.stage != stage {
			continue
		}
		k := t.take(now, len(in))
		t.skipped.Add(int64(len(in) - k))
		off := 0
		if k > 0 {
			off = rand.IntN(len(in))
		}
		for j := range k {
			i := (off + j*len(in)/k) % len(in) // spread over the call, from a random start
			ev := TapEvent{Time: now, Stage: stage, In: recview.Of(&in[i], t.bytes), Batch: len(in), TookMS: float64(took.Microseconds()) / 1000}
			switch {
			case err != nil:
				ev.CallErr = err.Error()
			case i < len(out) && out[i].Err != nil:
				ev.Err = out[i].Err.Error()
			case i < len(out):
				ev.Out = make([]recview.Record, len(out[i].Records))
				for r := range out[i].Records {
					ev.Out[r] = recview.Of(&out[i].Records[r], t.bytes)
				}
			}
			select {
			case t.ch <- ev:
			default:
				t.dropped.Add(1)
			}
		}
	}
}

// openTap adds a tap to o; close removes it.
func (o *observer) openTap(t *tap) (close func()) {
	o.mu.Lock()
	o.open = append(o.open, t)
	o.mu.Unlock()
	o.taps.Add(1)
	return func() {
		o.mu.Lock()
		o.open = slices.DeleteFunc(o.open, func(x *tap) bool { return x == t })
		o.mu.Unlock()
		o.taps.Add(-1)
	}
}

// tapStatus is the "status" event of a tap stream, once a second.
type tapStatus struct {
	Sent    int64   `json:"sent"`
	Dropped int64   `json:"dropped"`
	Skipped int64   `json:"skipped"`
	Rate    float64 `json:"rate"`
	Bytes   int     `json:"bytes"`
}

// tapStream serves GET /ui/api/tap/{p}[/{stage}]?rate=&bytes=: a stream
// of "record" events (TapEvent) and a "status" event each second.
func (c *Console) tapStream(w http.ResponseWriter, r *http.Request) {
	p, ok := c.pipelineOf(w, r)
	if !ok {
		return
	}
	stage := r.PathValue("stage")
	if stage != "" && !slices.ContainsFunc(p.Stages, func(s Stage) bool { return s.Name == stage }) {
		var names []string
		for _, s := range p.Stages {
			names = append(names, s.Name)
		}
		writeErr(w, http.StatusNotFound, "pipeline %q has no stage %q (stages: %v)", p.Name, stage, names)
		return
	}
	if len(p.Stages) == 0 {
		writeErr(w, http.StatusNotFound, "pipeline %q has no transform stage to tap", p.Name)
		return
	}
	o := c.lookupObserver(p.Name)
	if o == nil {
		writeErr(w, http.StatusServiceUnavailable, "pipeline %q does not report its stages to the console", p.Name)
		return
	}
	lim := c.o.tap
	t := &tap{stage: stage, rate: min(DefaultTapRate, lim.Rate), bytes: lim.ValueBytes, ch: make(chan TapEvent, 64), last: time.Now()}
	q := r.URL.Query()
	if s := q.Get("rate"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0) || v > lim.Rate {
			writeErr(w, http.StatusBadRequest, "rate=%q: want records per second above 0, at most %v ([console] tap_max_rate)", s, lim.Rate)
			return
		}
		t.rate = v
	}
	if s := q.Get("bytes"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > lim.ValueBytes {
			writeErr(w, http.StatusBadRequest, "bytes=%q: want 1 to %d ([console] tap_max_value_bytes)", s, lim.ValueBytes)
			return
		}
		t.bytes = v
	}
	t.tokens = min(1, t.rate) // the first record at once
	if n := c.openTaps.Add(1); n > int64(lim.Open) {
		c.openTaps.Add(-1)
		writeErr(w, http.StatusTooManyRequests, "%d taps are open, the most [console] tap_max_open allows; close one", lim.Open)
		return
	}
	defer c.openTaps.Add(-1)
	ctx, done, ok := admin.OpenStream(w, r)
	if !ok {
		return
	}
	defer done()
	s := startSSE(w)
	if s == nil {
		return
	}
	closeTap := o.openTap(t)
	defer closeTap()
	who := "anonymous"
	if cl, ok := admin.CallerOf(r.Context()); ok {
		who = cl.String()
	}
	c.o.log.Info("tap opened", "pipeline", p.Name, "stage", stage, "rate", t.rate, "bytes", t.bytes, "by", who, "remote", r.RemoteAddr)
	defer c.o.log.Info("tap closed", "pipeline", p.Name, "stage", stage, "remote", r.RemoteAddr)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var sent int64
	status := func() error {
		return s.send("status", 0, tapStatus{Sent: sent, Dropped: t.dropped.Load(), Skipped: t.skipped.Load(), Rate: t.rate, Bytes: t.bytes})
	}
	if status() != nil {
		return
	}
	for {
		select {
		case ev := <-t.ch:
			if s.send("record", 0, ev) != nil {
				return
			}
			sent++
		case <-tick.C:
			if status() != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-c.done:
			return
		}
	}
}
