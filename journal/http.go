package journal

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Handler serves the journal operations over HTTP (the admin API):
//
//	GET  /journal/{topic}/{id}?from=N          events as JSON lines (application/x-ndjson)
//	GET  /journal/{topic}/{id}/pointer         {"seqNr":N} or {"seqNr":null}
//	POST /journal/{topic}/{id}?expireAfter=D   append the JSON-lines events in the body
//	POST /journal/{topic}/{id}/delete?to=N     delete events up to N
//	POST /journal/{topic}/{id}/purge           remove the journal
//
// Writes answer {"partition":P,"offset":O} (delete of no journal: null).
// Errors answer {"error":"..."}: 400 for a bad request (including an id
// that is empty, over MaxIDBytes or not UTF-8, and a topic name Kafka
// does not allow), 404 for a topic that does not exist, 409 (with
// "seqNr") for an Append not above the journal's seqNr, 413 for a body
// over MaxBodyBytes or an Append over the Kafka record limit, 500 or 504
// for failures.
//
// The handler lists these routes with a method Routes() []string, as
// http.ServeMux patterns (for a server that checks every route it
// mounts).
func Handler(j *Journal) http.Handler {
	mux := &routedMux{ServeMux: http.NewServeMux()}
	key := func(r *http.Request) Key { return Key{Topic: r.PathValue("topic"), ID: r.PathValue("id")} }
	mux.HandleFunc("GET /journal/{topic}/{id}", func(w http.ResponseWriter, r *http.Request) {
		from := int64(1)
		if s := r.URL.Query().Get("from"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 1 {
				httpError(w, http.StatusBadRequest, fmt.Errorf("from=%q: want a seqNr >= 1", s))
				return
			}
			from = n
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		wrote := false
		_, err := j.Read(r.Context(), key(r), from, func(e Event) error {
			wrote = true
			return enc.Encode(e)
		})
		if err != nil && !wrote {
			httpError(w, statusOf(err), err)
			return
		}
		_ = bw.Flush()
	})
	mux.HandleFunc("GET /journal/{topic}/{id}/pointer", func(w http.ResponseWriter, r *http.Request) {
		seqNr, _, err := j.Pointer(r.Context(), key(r))
		if err != nil {
			httpError(w, statusOf(err), err)
			return
		}
		var v *int64
		if seqNr > 0 {
			v = &seqNr
		}
		writeJSON(w, map[string]*int64{"seqNr": v})
	})
	mux.HandleFunc("POST /journal/{topic}/{id}", func(w http.ResponseWriter, r *http.Request) {
		var opts []AppendOption
		if s := r.URL.Query().Get("expireAfter"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				httpError(w, http.StatusBadRequest, fmt.Errorf("expireAfter=%q: want a duration such as 24h", s))
				return
			}
			opts = append(opts, ExpireAfter(d))
		}
		evs, err := decodeEvents(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			// The limit is MaxBodyBytes, or a lower one of the server around
			// the handler (streamd's admin max_body_bytes).
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %s, the limit of one request (an Append must also fit one Kafka record, 1,000,012 bytes by default): split the events over several requests", byteSize(mbe.Limit)))
			return
		}
		if err != nil {
			httpError(w, http.StatusBadRequest, err)
			return
		}
		pos, err := j.Append(r.Context(), key(r), evs, opts...)
		if err != nil {
			httpError(w, statusOf(err), err)
			return
		}
		writeJSON(w, pos)
	})
	mux.HandleFunc("POST /journal/{topic}/{id}/delete", func(w http.ResponseWriter, r *http.Request) {
		s := r.URL.Query().Get("to")
		to, err := strconv.ParseInt(s, 10, 64)
		if err != nil || to < 1 {
			httpError(w, http.StatusBadRequest, fmt.Errorf("to=%q: want a seqNr >= 1", s))
			return
		}
		pos, ok, err := j.Delete(r.Context(), key(r), to)
		if err != nil {
			httpError(w, statusOf(err), err)
			return
		}
		if !ok {
			writeJSON(w, nil)
			return
		}
		writeJSON(w, pos)
	})
	mux.HandleFunc("POST /journal/{topic}/{id}/purge", func(w http.ResponseWriter, r *http.Request) {
		pos, err := j.Purge(r.Context(), key(r))
		if err != nil {
			httpError(w, statusOf(err), err)
			return
		}
		writeJSON(w, pos)
	})
	return mux
}

// routedMux is an http.ServeMux that lists its patterns.
type routedMux struct {
	*http.ServeMux
	routes []string
}

func (m *routedMux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.ServeMux.HandleFunc(pattern, f)
	m.routes = append(m.routes, pattern)
}

// Routes lists the handler's routes as http.ServeMux patterns.
func (m *routedMux) Routes() []string { return append([]string(nil), m.routes...) }

// MaxBodyBytes is the largest request body the HTTP API reads (an Append's
// events); a larger one is refused whole with 413.
const MaxBodyBytes = 64 << 20

// byteSize writes n as "64 MiB" when it is a whole number of MiB, else
// "N bytes".
func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// decodeEvents reads JSON-lines events (a JSON array is accepted too).
func decodeEvents(r io.Reader) ([]Event, error) {
	br := bufio.NewReader(r)
	dec := json.NewDecoder(br)
	var evs []Event
	for i := 1; ; i++ {
		var e Event
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		return nil, errors.New("no events in the body (want JSON lines: {\"seqNr\":1,\"payload\":{...}})")
	}
	return evs, nil
}

func statusOf(err error) int {
	if errors.Is(err, ErrInvalid) {
		return http.StatusBadRequest
	}
	if errors.Is(err, ErrTooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	if errors.Is(err, ErrUnknownTopic) {
		return http.StatusNotFound
	}
	if errors.Is(err, ErrConflict) {
		return http.StatusConflict
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// errorBody is the JSON of a failed request; a refused Append (409) also
// carries the journal's seqNr that the Append's first seqNr must exceed.
type errorBody struct {
	Error string `json:"error"`
	SeqNr *int64 `json:"seqNr,omitempty"`
}

func httpError(w http.ResponseWriter, status int, err error) {
	b := errorBody{Error: err.Error()}
	var ce *ConflictError
	if errors.As(err, &ce) {
		b.SeqNr = &ce.SeqNr
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}
