package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamd/streamd/plugins"
)

// LagUnknown is the lag a Lagger reports for a partition whose lag cannot
// be measured now: the broker is unreachable or frozen, or the partition
// was lost with the group session. It is never reported as 0.
const LagUnknown int64 = -1

// LagMap is a source's lag per "topic/partition". In JSON a LagUnknown
// value is the string "unknown".
type LagMap map[string]int64

// MarshalJSON implements json.Marshaler, with sorted keys.
func (m LagMap) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
		if v := m[k]; v < 0 {
			b.WriteString(`"unknown"`)
		} else {
			b.WriteString(strconv.FormatInt(v, 10))
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON implements json.Unmarshaler: numbers, and "unknown" for
// LagUnknown.
func (m *LagMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(LagMap, len(raw))
	for k, v := range raw {
		if string(v) == `"unknown"` {
			out[k] = LagUnknown
			continue
		}
		var n int64
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("lag of %s: %w", k, err)
		}
		out[k] = n
	}
	*m = out
	return nil
}

// Conditioner is implemented by sources and sinks that know why they
// cannot make progress now (the broker refuses connections, a lag query
// fails). Condition returns nil when nothing is wrong. Status gives it as
// part of the reason a pipeline is stalled.
type Conditioner interface {
	Condition() error
}

// Answerer is implemented by sources that know when their server last
// answered them (a Kafka source: any broker response; an idle fetch is
// answered every fetch max wait, 100 ms by default). An idle pipeline
// counts as progressing up to that answer, not up to now: when the server
// stops answering (frozen, cut off), the stall clock runs from its last
// answer, and a pipeline that hears nothing for the stall timeout is
// stalled even while its lag still looks known.
type Answerer interface {
	// LastAnswer returns when the server last answered; zero if it never
	// did.
	LastAnswer() time.Time
}

func condition(part any) error {
	if c, ok := part.(Conditioner); ok {
		return c.Condition()
	}
	return nil
}

// trouble is the pipeline's latest transient error.
type trouble struct {
	err error
	at  time.Time
}

// noteTrouble records err as the latest transient problem, for Status.
func (p *Pipeline) noteTrouble(err error) {
	p.mu.Lock()
	p.trouble = trouble{err, time.Now()}
	p.mu.Unlock()
}

// progress records acknowledged progress.
func (p *Pipeline) progress() { p.lastProgress.Store(time.Now().UnixNano()) }

// stall says whether a running pipeline is stalled, and why: it has work
// pending and has acknowledged nothing for the stall timeout. Work is
// pending when records are in flight, when the lag of an assigned
// partition is unknown (the broker cannot be reached), or when a
// partition has lag and the source reports a condition (its fetches
// fail). Lag alone is not pending work: at the end of a topic written
// with transactions, the commit markers keep the lag at 1 or more
// forever, as in Kafka's own tools. An idle pipeline counts as
// progressing, up to its source's last answer (Answerer) when it knows
// it: one whose server stopped answering is stalled the stall timeout
// after the last answer. wedged is true when the pipeline is stalled and
// nothing outside it says why: no source, sink or dead-letter condition,
// the lag known, and no recent error but plugin timeouts (a stage or sink
// that blocks, cut by its call timeout and retried), as opposed to a stall
// with an outside cause such as a broker that cannot be reached.
func (p *Pipeline) stall(now time.Time, inflight int64, lag LagMap) (stalled bool, reason string, wedged bool) {
	unknown, behind := 0, 0
	for _, v := range lag {
		switch {
		case v < 0:
			unknown++
		case v > 0:
			behind++
		}
	}
	srcCond := condition(p.src)
	pending := inflight > 0 || unknown > 0 || (behind > 0 && srcCond != nil)
	var heard time.Time
	if a, ok := p.src.(Answerer); ok {
		heard = a.LastAnswer()
	}
	if !pending {
		// Idle: progressing as of now, or as of the source's last answer
		// while it has partitions to read and reads them (a paused
		// source, or one with nothing assigned, fetches nothing: only
		// heartbeats, seconds apart, answer it).
		at := now
		if !heard.IsZero() && heard.Before(now) && len(lag) > 0 && !p.Paused() {
			at = heard
		}
		if at.UnixNano() > p.lastProgress.Load() {
			p.lastProgress.Store(at.UnixNano())
		}
	}
	since := now.Sub(time.Unix(0, p.lastProgress.Load()))
	if p.o.stallTimeout <= 0 || since < p.o.stallTimeout {
		return false, "", false
	}
	known := srcCond != nil || unknown > 0 // lag unknown: the broker does not answer
	var why []string
	what := fmt.Sprintf("no progress for %s with %d records in flight", roughly(since), inflight)
	if unknown > 0 {
		what += fmt.Sprintf(", lag unknown for %d of %d partitions", unknown, len(lag))
	}
	if !heard.IsZero() && now.Sub(heard) >= p.o.stallTimeout {
		what += fmt.Sprintf(", no answer from the source's brokers for %s", roughly(now.Sub(heard)))
		known = true // the broker does not answer
	}
	why = append(why, what)
	if srcCond != nil {
		why = append(why, "source: "+srcCond.Error())
	}
	if err := condition(p.sink); err != nil {
		why = append(why, "sink: "+err.Error())
		known = true
	}
	if err := condition(p.o.dlq); err != nil {
		why = append(why, "dlq: "+err.Error())
		known = true
	}
	p.mu.Lock()
	t := p.trouble
	p.mu.Unlock()
	if t.err != nil && now.Sub(t.at) <= since {
		why = append(why, fmt.Sprintf("last error %s ago: %v", roughly(now.Sub(t.at)), t.err))
		known = known || !errors.Is(t.err, plugins.ErrTimeout)
	}
	return true, strings.Join(why, "; "), !known
}

// roughly rounds d for a message: to the second from 10 s, else to 100 ms.
func roughly(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// watch logs when the pipeline stalls and when it progresses again.
func (p *Pipeline) watch(done <-chan struct{}) {
	if p.o.stallTimeout <= 0 {
		return
	}
	t := time.NewTicker(min(time.Second, max(p.o.stallTimeout/4, 10*time.Millisecond)))
	defer t.Stop()
	stalled := false
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		s := p.Status()
		switch {
		case s.Stalled && !stalled:
			p.o.logger.Warn("pipeline stalled", "pipeline", p.name, "reason", s.Reason)
		case !s.Stalled && stalled:
			p.o.logger.Info("pipeline progressing again", "pipeline", p.name)
		}
		stalled = s.Stalled
	}
}

var errNotConnected = errors.New("not connected yet")
