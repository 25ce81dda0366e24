package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/streamd/streamd/internal/daemon/admin"
	"github.com/streamd/streamd/pipeline"
)

// sseWriteTimeout bounds one event's write: a client that reads nothing
// for this long is dropped (the admin server's write timeout, meant for
// one response, is lifted for a stream).
const sseWriteTimeout = 30 * time.Second

// sse writes server-sent events to one client.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE answers with an event stream; nil if w cannot stream.
func startSSE(w http.ResponseWriter) *sse {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil
	}
	return &sse{w: w, rc: rc}
}

// send writes one event with v as JSON data.
func (s *sse) send(event string, id int64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.sendData(event, id, b)
}

// sendData writes one event with data b (one line of JSON).
func (s *sse) sendData(event string, id int64, b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if id != 0 {
		if _, err := fmt.Fprintf(s.w, "id: %d\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// comment writes a keep-alive comment.
func (s *sse) comment() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if _, err := fmt.Fprint(s.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// statusView is what a tick says of a pipeline besides its samples.
type statusView struct {
	pipeline.Status
	// LagKnown is false while the lag of some partition is unknown.
	LagKnown bool `json:"lag_known"`
}

// tickEvent is the data of a "hello" (all history) or "tick" event.
type tickEvent struct {
	T         int64                 `json:"t"`
	Interval  int64                 `json:"interval_ms"`
	History   int64                 `json:"history_ms"`
	Samples   map[string][]Sample   `json:"samples"`
	Status    map[string]statusView `json:"status"`
	Pipelines []string              `json:"pipelines"`
}

// tickCache is the encoded "tick" event of the newest sampling: built
// once, by the first stream that needs it, and sent as is to every stream
// that had sent the tick before (all of them, but one that just started
// or fell behind).
type tickCache struct {
	mu   sync.Mutex
	t    int64
	data []byte
}

// tickData encodes the tick event of the samples after since up to t.
func (c *Console) tickData(since, t int64) ([]byte, error) {
	var samples map[string][]Sample
	if since < 0 {
		samples, _, _ = c.series.since(0)
	} else {
		samples = c.series.between(since, t)
	}
	ev := tickEvent{T: t, Interval: c.o.interval.Milliseconds(), History: c.o.history.Milliseconds(),
		Samples: samples, Status: map[string]statusView{}}
	for _, p := range c.o.pipelines() {
		ev.Pipelines = append(ev.Pipelines, p.Name)
		if p.P != nil {
			st := p.P.Status()
			ev.Status[p.Name] = statusView{Status: st, LagKnown: lagSum(st.Lag) >= 0 || len(st.Lag) == 0}
		} else if p.Loading != nil {
			ev.Status[p.Name] = statusView{Status: *p.Loading, LagKnown: true}
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return c.redactJSON(b), nil
}

// nextTick returns the tick event after last: the shared one when last is
// the tick before the newest, else one of its own; nil data when there
// is nothing newer than last.
func (c *Console) nextTick(last int64) (t int64, data []byte, wake <-chan struct{}, err error) {
	t, prev, wake := c.series.newest()
	if t <= last {
		return t, nil, wake, nil
	}
	if last != prev {
		data, err = c.tickData(last, t)
		return t, data, wake, err
	}
	c.tick.mu.Lock()
	defer c.tick.mu.Unlock()
	if c.tick.t != t {
		b, err := c.tickData(prev, t)
		if err != nil {
			return t, nil, wake, err
		}
		c.tick.t, c.tick.data = t, b
	}
	return t, c.tick.data, wake, nil
}

// events streams the series: a "hello" event with every sample kept,
// then a "tick" event with the new samples after each sampling. A client
// that reconnects with Last-Event-ID gets the samples it missed. The
// stream counts against the admin server's limit of long-lived responses
// (admin.OpenStream), and ends when its token is revoked.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	var last int64
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		_, _ = fmt.Sscan(id, &last)
	}
	ctx, done, ok := admin.OpenStream(w, r)
	if !ok {
		return
	}
	defer done()
	s := startSSE(w)
	if s == nil {
		writeErr(w, http.StatusInternalServerError, "the connection cannot stream events")
		return
	}
	// The hello: everything after Last-Event-ID (all kept, without one).
	t, _, wake := c.series.newest()
	since := last
	if since == 0 {
		since = -1
	}
	data, err := c.tickData(since, t)
	if err != nil || s.sendData("hello", t, data) != nil {
		return
	}
	last = t
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-wake:
		case <-keepAlive.C:
			if err := s.comment(); err != nil {
				return
			}
			continue
		case <-ctx.Done():
			return
		case <-c.done:
			return
		}
		var data []byte
		var err error
		t, data, wake, err = c.nextTick(last)
		if err != nil {
			return
		}
		if data == nil {
			continue
		}
		if s.sendData("tick", t, data) != nil {
			return
		}
		last = t
	}
}
