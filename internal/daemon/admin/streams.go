package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/streamd/streamd/internal/daemon/defaults"
)

// Defaults of the long-lived responses' limits (WithStreamLimits).
const (
	// DefaultMaxStreams is how many long-lived responses (event streams,
	// taps) may be open at once on the admin server.
	DefaultMaxStreams = defaults.AdminMaxStreams
	// DefaultMaxStreamsPerToken is how many of them one token (or one
	// client certificate) may hold.
	DefaultMaxStreamsPerToken = defaults.AdminMaxStreamsPerToken
)

// ErrRevoked is the cause of a stream's context when its token was
// revoked (or the tokens file could not be read any more).
var ErrRevoked = errors.New("the token of this stream was revoked")

// streams counts the long-lived responses and watches their tokens.
type streams struct {
	max, perCaller int

	mu       sync.Mutex
	open     int
	by       map[string]int // open streams per caller (token hash, certificate)
	watched  map[*stream]struct{}
	watching bool
	refused  int64
	lastLog  time.Time
}

// stream is one open long-lived response.
type stream struct {
	key    string
	token  bool
	c      *Caller
	cancel context.CancelCauseFunc
}

// OpenStream counts a long-lived response (an event stream, a tap) that
// the handler of r is about to start, against the admin server's limit
// and the caller's share of it (WithStreamLimits). Past either it answers
// 429 itself (and closes the connection) and returns ok false. Otherwise
// the handler streams until ctx is done and then calls done: ctx ends
// with r's, and, for a caller with a bearer token, within a second of the
// token being revoked or the tokens file becoming unreadable
// (context.Cause is ErrRevoked). A request the admin server's guard did
// not pass (a handler served alone) is not counted.
func OpenStream(w http.ResponseWriter, r *http.Request) (ctx context.Context, done func(), ok bool) {
	c, _ := r.Context().Value(callerKey{}).(*Caller)
	if c == nil || c.srv == nil {
		return r.Context(), func() {}, true
	}
	s := c.srv
	st := &stream{c: c}
	switch {
	case c.Token != "":
		st.key, st.token = "token:"+fmt.Sprintf("%x", c.hash[:8]), s.tokens != nil
	case c.Cert != "":
		st.key = "cert:" + c.Cert
	}
	if err := s.streams.add(st); err != nil {
		s.streams.noteRefused(s, r, c, err)
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "5")
		WriteJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many streams", "detail": err.Error()})
		return nil, nil, false
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	st.cancel = cancel
	if st.token {
		s.streams.watch(s, st)
	}
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			cancel(nil)
			s.streams.remove(st)
		})
	}, true
}

func (ss *streams) add(st *stream) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	max, per := ss.max, ss.perCaller
	if max <= 0 {
		max = DefaultMaxStreams
	}
	if per <= 0 {
		per = min(DefaultMaxStreamsPerToken, max)
	}
	if ss.open >= max {
		return fmt.Errorf("%d long-lived responses (event streams, taps) are open, the most [admin] max_streams allows; close one, or raise the limit", max)
	}
	if st.key != "" && ss.by[st.key] >= per {
		return fmt.Errorf("%s holds %d long-lived responses (event streams, taps), the most one caller may ([admin] max_streams_per_token); close one", st.c, per)
	}
	ss.open++
	if st.key != "" {
		if ss.by == nil {
			ss.by = map[string]int{}
		}
		ss.by[st.key]++
	}
	return nil
}

func (ss *streams) remove(st *stream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.open--
	if st.key != "" {
		if ss.by[st.key]--; ss.by[st.key] <= 0 {
			delete(ss.by, st.key)
		}
	}
	delete(ss.watched, st)
}

// noteRefused logs refusals, at most one line a second (a client that
// retries in a loop would fill the log otherwise).
func (ss *streams) noteRefused(s *Server, r *http.Request, c *Caller, err error) {
	ss.mu.Lock()
	ss.refused++
	n := ss.refused
	now := time.Now()
	logIt := now.Sub(ss.lastLog) >= time.Second
	if logIt {
		ss.lastLog = now
	}
	ss.mu.Unlock()
	if logIt {
		s.log.Warn("admin request refused", append(c.logArgs(), "status", http.StatusTooManyRequests, "reason", err.Error(),
			"path", r.URL.Path, "remote", r.RemoteAddr, "refused_so_far", n)...)
	}
}

// watch adds st to the streams whose token is looked at again every
// tokensCheckInterval, and starts the watch if it is not running.
func (ss *streams) watch(s *Server, st *stream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.watched == nil {
		ss.watched = map[*stream]struct{}{}
	}
	ss.watched[st] = struct{}{}
	if ss.watching {
		return
	}
	ss.watching = true
	go ss.watchLoop(s)
}

// watchLoop ends the streams whose token is no longer in force; it stops
// when no stream is watched.
func (ss *streams) watchLoop(s *Server) {
	t := time.NewTicker(tokensCheckInterval)
	defer t.Stop()
	for range t.C {
		ss.mu.Lock()
		if len(ss.watched) == 0 {
			ss.watching = false
			ss.mu.Unlock()
			return
		}
		list := make([]*stream, 0, len(ss.watched))
		for st := range ss.watched {
			list = append(list, st)
		}
		ss.mu.Unlock()
		for _, st := range list {
			if _, role := s.tokens.lookupHash(st.c.hash); role == RoleNone {
				st.cancel(ErrRevoked)
				ss.mu.Lock()
				delete(ss.watched, st)
				ss.mu.Unlock()
				s.log.Warn("admin stream closed: its token is no longer in force", append(st.c.logArgs(), "reason", revokedWhy(s.tokens))...)
			}
		}
	}
}

func revokedWhy(t *Tokens) string {
	if t.unavailable() {
		return "the tokens file cannot be read"
	}
	return "the token is not in the tokens file any more"
}

// StreamsOpen returns how many long-lived responses are open.
func (s *Server) StreamsOpen() int {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	return s.streams.open
}
