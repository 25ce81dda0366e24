package admin

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamd/streamd/pipeline"
)

// Server serves the admin API.
type Server struct {
	mux       *http.ServeMux
	prefixes  []prefixRoute
	guarded   http.Handler
	srv       *http.Server
	pipelines func() []*pipeline.Pipeline
	statuses  func() []pipeline.Status // WithStatuses; nil: pipelines' statuses
	starting  func() string            // WithStarting
	log       *slog.Logger

	tls        *tls.Config
	tokens     *Tokens
	probesOpen bool
	allowOpen  bool
	timeouts   Timeouts
	maxHeader  int
	maxBody    int64
	hosts      []string
	routes     []mounted
	redact     func(string) string
	streams    streams
	listenName string // the host name of Start's address, when it is one
}

// New returns a server for the pipelines that pipelines returns, with
// metrics from gatherer.
func New(gatherer prometheus.Gatherer, pipelines func() []*pipeline.Pipeline, log *slog.Logger, opts ...Option) *Server {
	s := &Server{mux: http.NewServeMux(), pipelines: pipelines, log: log, probesOpen: true,
		timeouts:  Timeouts{DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultWriteTimeout, DefaultIdleTimeout},
		maxHeader: DefaultMaxHeaderBytes, maxBody: DefaultMaxBodyBytes}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, o := range opts {
		o(s)
	}
	s.guarded = s.guard(http.HandlerFunc(s.route))
	s.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	s.Handle("GET /readyz", http.HandlerFunc(s.readyz))
	s.Handle("GET /pipelines", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.WriteRedactedJSON(w, http.StatusOK, s.status())
	}))
	s.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	s.Handle("/debug/pprof/", http.HandlerFunc(pprof.Index))
	s.Handle("/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	s.Handle("/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	return s
}

// readyz answers 503 while the server's owner is starting (WithStarting),
// or while a pipeline that is not done or stopped is not ready
// (connecting, failed, unhealthy, or stalled: see pipeline.Status), naming
// them. Each one's reason (which can name brokers, users and the text of
// errors) is given only to a caller who may read: a token of role read or
// write, or anyone when no tokens are configured; an open probe
// (WithProbesOpen) without a token gets the names alone.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.starting != nil {
		if why := s.starting(); why != "" {
			WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "starting", "reason": why})
			return
		}
	}
	var notReady []string
	reasons := map[string]string{}
	for _, st := range s.status() {
		if st.State == pipeline.StateDone || st.State == pipeline.StateStopped {
			continue
		}
		if !st.Ready {
			notReady = append(notReady, st.Name)
			reasons[st.Name] = s.redactText(st.Reason)
		}
	}
	if len(notReady) > 0 {
		body := map[string]any{"status": "not ready", "pipelines": notReady}
		if c, _ := CallerOf(r.Context()); c.Role >= RoleRead || s.tokens == nil {
			body["reasons"] = reasons
		} else {
			body["detail"] = "why: send a token of role read"
		}
		WriteJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// status is every pipeline's status, for /pipelines and /readyz.
func (s *Server) status() []pipeline.Status {
	if s.statuses != nil {
		return s.statuses()
	}
	var out []pipeline.Status
	for _, p := range s.pipelines() {
		out = append(out, p.Status())
	}
	return out
}

// Handle mounts h on pattern (http.ServeMux syntax).
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	s.routes = append(s.routes, mounted{pattern, h})
}

// Router is implemented by a handler mounted on the server that can list
// the requests it serves, as http.ServeMux patterns ("GET /a/{x}", or a
// path alone for any method): Routes names them instead of the pattern it
// was mounted on.
type Router interface {
	Routes() []string
}

type mounted struct {
	pattern string
	h       http.Handler
}

// Routes returns the pattern of every request the server serves: its own
// routes, and those mounted with Handle and HandlePrefix (what a mounted
// Router lists, else the pattern or prefix it was mounted on), in the
// order they were mounted. Tests walk it to check every route against the
// guard, so that a route added later is checked without anyone listing
// it.
func (s *Server) Routes() []string {
	var out []string
	seen := map[string]bool{}
	add := func(pattern string, h http.Handler) {
		list := []string{pattern}
		if r, ok := h.(Router); ok {
			list = r.Routes()
		}
		for _, p := range list {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	for _, m := range s.routes {
		add(m.pattern, m.h)
	}
	for _, p := range s.prefixes {
		add(p.prefix, p.h)
	}
	return out
}

type prefixRoute struct {
	prefix string
	h      http.Handler
}

// HandlePrefix mounts h on every path that starts with prefix, as sent:
// unlike Handle, the path is not cleaned first (http.ServeMux answers
// "/a//b" with a redirect), so h answers every request under prefix
// itself. Mount before Start.
func (s *Server) HandlePrefix(prefix string, h http.Handler) {
	s.prefixes = append(s.prefixes, prefixRoute{prefix, h})
}

// ServeHTTP implements http.Handler: the server's routes behind its guards
// (body limit, tokens), as Start serves them.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.guarded.ServeHTTP(w, r) }

// route dispatches a request that has passed the guards.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	for _, p := range s.prefixes {
		if strings.HasPrefix(r.URL.Path, p.prefix) {
			p.h.ServeHTTP(w, r)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// Handler returns the server's handler with its guards, as Start serves
// it; for tests.
func (s *Server) Handler() http.Handler { return s }

// Start listens on addr and serves in the background; it returns the
// address actually bound. An address that is not loopback is refused
// unless tokens or mutual TLS are configured, or WithAllowUnauthenticated.
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	if err := s.exposed(addr, ln.Addr()); err != nil {
		_ = ln.Close()
		return "", err
	}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" && net.ParseIP(h) == nil {
		s.listenName = h // the name it was told to listen on is its own
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.timeouts.ReadHeader,
		ReadTimeout:       s.timeouts.Read,
		WriteTimeout:      s.timeouts.Write,
		IdleTimeout:       s.timeouts.Idle,
		MaxHeaderBytes:    s.maxHeader,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.tls != nil {
		s.srv.TLSConfig = s.tls
		ln = tls.NewListener(ln, s.tls)
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server", "err", err)
		}
	}()
	return ln.Addr().String(), nil
}

// exposed refuses a listener that other hosts can reach when nothing
// authenticates its clients.
func (s *Server) exposed(addr string, bound net.Addr) error {
	if s.tokens != nil || mutualTLS(s.tls) || s.allowOpen {
		return nil
	}
	if ta, ok := bound.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("admin listen %q (bound %s) is not a loopback address, and no auth is configured: anyone who can reach it "+
		"could append, delete and purge journals and move fluid consumer groups. Configure [admin.auth] tokens_file = \"/path/to/tokens\" "+
		"(lines \"ROLE NAME TOKEN\", ROLE read or write), or [admin.tls] client_ca_file for mutual TLS; or set [admin] allow_unauthenticated = true "+
		"to serve it without auth anyway; or listen on 127.0.0.1", addr, bound)
}

// TLS reports whether the server serves HTTPS.
func (s *Server) TLS() bool { return s.tls != nil }

// Shutdown stops the server.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Shutdown(ctx)
}

// WriteJSON answers v as indented JSON with status code: the admin API's
// one way to write a JSON answer (its routes and the daemon's /v1/ use it).
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// redactText is s with what the redactor (WithRedactor) hides hidden.
func (s *Server) redactText(t string) string {
	if s.redact == nil {
		return t
	}
	return s.redact(t)
}

// WriteRedactedJSON is WriteJSON with every string of v passed through
// the server's redactor (WithRedactor): for answers that carry errors and
// status, which can quote configuration values.
func (s *Server) WriteRedactedJSON(w http.ResponseWriter, code int, v any) {
	if s.redact == nil {
		WriteJSON(w, code, v)
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		WriteJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	b = RedactJSON(b, s.redact)
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		out.Reset()
		out.Write(b)
	}
	out.WriteByte('\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(out.Bytes())
}

// InProcess returns a RoundTripper that serves requests with the server's
// routes inside this process, without the network and without tokens
// (the body limit still applies): for the process's own clients, such as
// a fluid consumer whose bridge is this server. The request's host is
// ignored.
func (s *Server) InProcess() http.RoundTripper { return inProcess{s} }

type inProcess struct{ s *Server }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	in := r.Clone(r.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	if t.s.maxBody > 0 && in.Body != http.NoBody {
		in.Body = http.MaxBytesReader(nil, in.Body, t.s.maxBody)
	}
	in.RequestURI = r.URL.RequestURI()
	in.RemoteAddr = "in-process"
	w := &memResponse{header: http.Header{}, code: http.StatusOK}
	t.s.route(w, in)
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: r,
	}, nil
}

// memResponse is an http.ResponseWriter into memory.
type memResponse struct {
	header http.Header
	code   int
	wrote  bool
	body   bytes.Buffer
}

func (m *memResponse) Header() http.Header { return m.header }

func (m *memResponse) WriteHeader(code int) {
	if !m.wrote {
		m.code, m.wrote = code, true
	}
}

func (m *memResponse) Write(p []byte) (int, error) {
	m.WriteHeader(http.StatusOK)
	return m.body.Write(p)
}
