package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerWatch is a franz-go hook that remembers, per broker, whether the
// last connection attempt or request failed, so that a sink or source can
// say why it makes no progress (pipeline.Conditioner).
type brokerWatch struct {
	mu    sync.Mutex
	state map[int32]brokerState
	ok    time.Time // when a broker last answered a request
}

type brokerState struct {
	err  error
	at   time.Time
	addr string
}

// conditionTTL is how long a broker's error counts after it last
// happened: franz-go retries a broker it needs every few seconds, so an
// outage keeps the error fresh, and one that is not retried is stale.
const conditionTTL = 30 * time.Second

func newBrokerWatch() *brokerWatch { return &brokerWatch{state: map[int32]brokerState{}} }

func (w *brokerWatch) note(meta kgo.BrokerMetadata, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
		return // the client's own doing, not the broker's
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		delete(w.state, meta.NodeID)
		w.ok = time.Now()
		return
	}
	w.state[meta.NodeID] = brokerState{err: err, at: time.Now(), addr: net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port))}
}

// lastAnswer returns when a broker last answered a request (zero: never).
func (w *brokerWatch) lastAnswer() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ok
}

// LastAnswer implements pipeline.Answerer: when a broker last answered the
// source's client (a fetch, empty or not, every FetchMaxWait while idle;
// a heartbeat; a commit; an end-offset query). The stall clock of an idle
// pipeline runs from it, so a frozen or cut-off broker shows as a stall
// the stall timeout after its last answer, not when the lag turns unknown.
func (s *Source) LastAnswer() time.Time { return s.watch.lastAnswer() }

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (w *brokerWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	w.note(meta, err)
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (w *brokerWatch) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	w.note(meta, e2e.Err())
}

// lastFailure returns the state of the broker whose connection or request
// failed last, if that is still fresh; the zero brokerState if none is.
func (w *brokerWatch) lastFailure() brokerState {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last brokerState
	for _, s := range w.state {
		if time.Since(s.at) <= conditionTTL && s.at.After(last.at) {
			last = s
		}
	}
	return last
}

// condition returns the most recent broker error that is still fresh.
func (w *brokerWatch) condition() error {
	last := w.lastFailure()
	if last.err == nil {
		return nil
	}
	return fmt.Errorf("broker %s: %w", last.addr, last.err)
}
