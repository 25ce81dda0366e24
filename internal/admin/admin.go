// Package admin is streamd's admin HTTP server: /healthz, /readyz,
// /metrics, /pipelines, pprof, and the routes other parts mount (fluid,
// journal).
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamd/streamd/pipeline"
)

// Server serves the admin API.
type Server struct {
	mux       *http.ServeMux
	prefixes  []prefixRoute
	srv       *http.Server
	pipelines func() []*pipeline.Pipeline
	log       *slog.Logger
}

// New returns a server for the pipelines that pipelines returns, with
// metrics from gatherer.
func New(gatherer prometheus.Gatherer, pipelines func() []*pipeline.Pipeline, log *slog.Logger) *Server {
	s := &Server{mux: http.NewServeMux(), pipelines: pipelines, log: log}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /pipelines", func(w http.ResponseWriter, _ *http.Request) {
		var out []pipeline.Status
		for _, p := range s.pipelines() {
			out = append(out, p.Status())
		}
		writeJSON(w, http.StatusOK, out)
	})
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("/debug/pprof/", pprof.Index)
	s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return s
}

// readyz answers 503 while a pipeline that is not done or stopped is not
// ready (connecting, failed, unhealthy, or stalled: see pipeline.Status),
// with each one's reason.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	var notReady []string
	reasons := map[string]string{}
	for _, p := range s.pipelines() {
		st := p.Status()
		if st.State == pipeline.Done || st.State == pipeline.Stopped {
			continue
		}
		if !st.Ready {
			notReady = append(notReady, p.Name())
			reasons[p.Name()] = st.Reason
		}
	}
	if len(notReady) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "pipelines": notReady, "reasons": reasons})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// Handle mounts h on pattern (http.ServeMux syntax).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

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

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, p := range s.prefixes {
		if strings.HasPrefix(r.URL.Path, p.prefix) {
			p.h.ServeHTTP(w, r)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// Handler returns the server's handler, for tests.
func (s *Server) Handler() http.Handler { return s }

// Start listens on addr and serves in the background; it returns the
// address actually bound.
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server", "err", err)
		}
	}()
	return ln.Addr().String(), nil
}

// Shutdown stops the server.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Shutdown(ctx)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
