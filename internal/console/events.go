package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

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

// events streams the series: a "hello" event with every sample kept,
// then a "tick" event with the new samples after each sampling. A client
// that reconnects with Last-Event-ID gets the samples it missed.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	var last int64
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		_, _ = fmt.Sscan(id, &last)
	}
	s := startSSE(w)
	if s == nil {
		writeErr(w, http.StatusInternalServerError, "the connection cannot stream events")
		return
	}
	event := "hello"
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		samples, t, wake := c.series.since(last)
		if t > last || event == "hello" {
			ev := tickEvent{T: t, Interval: c.o.interval.Milliseconds(), History: c.o.history.Milliseconds(),
				Samples: samples, Status: map[string]statusView{}}
			for _, p := range c.o.pipelines() {
				ev.Pipelines = append(ev.Pipelines, p.Name)
				if p.P != nil {
					st := p.P.Status()
					ev.Status[p.Name] = statusView{Status: st, LagKnown: lagSum(st.Lag) >= 0 || len(st.Lag) == 0}
				}
			}
			if err := s.send(event, t, ev); err != nil {
				return
			}
			event, last = "tick", t
		}
		select {
		case <-wake:
		case <-keepAlive.C:
			if err := s.comment(); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		}
	}
}
