package admin

import (
	"crypto/tls"
	"time"

	"github.com/streamd/streamd/internal/daemon/defaults"
	"github.com/streamd/streamd/pipeline"
)

// Defaults of the server's limits, used for the options not given (and by
// streamd's config for the keys a file leaves out).
// The numbers live in internal/daemon/defaults, which the config reads
// without importing this server.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers: a
	// client that sends them slowly is cut off.
	DefaultReadHeaderTimeout = defaults.AdminReadHeaderTimeout
	// DefaultReadTimeout bounds reading a whole request, body included.
	DefaultReadTimeout = defaults.AdminReadTimeout
	// DefaultWriteTimeout bounds writing a response (from the end of the
	// request's headers); above pprof's default 30 s profile.
	DefaultWriteTimeout = defaults.AdminWriteTimeout
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = defaults.AdminIdleTimeout
	// DefaultMaxHeaderBytes bounds a request's headers.
	DefaultMaxHeaderBytes = defaults.AdminMaxHeaderBytes
	// DefaultMaxBodyBytes bounds a request's body (the journal's own
	// limit, 64 MiB, is the largest a mounted handler takes).
	DefaultMaxBodyBytes = defaults.AdminMaxBodyBytes
)

// Timeouts are the HTTP server's timeouts; zero fields get the defaults.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// Option configures a Server.
type Option func(*Server)

// WithStatuses makes /pipelines and /readyz report what f returns instead
// of the statuses of the server's pipelines: pipelines that have no
// pipeline.Pipeline yet (their plugins load) or never will (they failed
// to load) included.
func WithStatuses(f func() []pipeline.Status) Option { return func(s *Server) { s.statuses = f } }

// WithStarting makes /readyz answer 503 with the reason f returns while it
// is not "": the parts the server's owner starts after the listener opened
// (the liveness probe /healthz answers meanwhile).
func WithStarting(f func() string) Option { return func(s *Server) { s.starting = f } }

// WithTLS serves HTTPS with c (certificates, and for mutual TLS ClientCAs
// with ClientAuth tls.RequireAndVerifyClientCert).
func WithTLS(c *tls.Config) Option { return func(s *Server) { s.tls = c } }

// WithTokens requires a bearer token from t on every request but the
// probes (see WithProbesOpen).
func WithTokens(t *Tokens) Option { return func(s *Server) { s.tokens = t } }

// WithProbesOpen says whether /healthz and /readyz answer without a token
// when tokens are required (default true: for load balancers and
// orchestrators).
func WithProbesOpen(open bool) Option { return func(s *Server) { s.probesOpen = open } }

// WithAllowUnauthenticated lets Start listen on an address that is not
// loopback without tokens or mutual TLS.
func WithAllowUnauthenticated(allow bool) Option { return func(s *Server) { s.allowOpen = allow } }

// WithTimeouts sets the server's timeouts; zero fields keep the defaults.
func WithTimeouts(t Timeouts) Option {
	return func(s *Server) {
		if t.ReadHeader > 0 {
			s.timeouts.ReadHeader = t.ReadHeader
		}
		if t.Read > 0 {
			s.timeouts.Read = t.Read
		}
		if t.Write > 0 {
			s.timeouts.Write = t.Write
		}
		if t.Idle > 0 {
			s.timeouts.Idle = t.Idle
		}
	}
}

// WithMaxHeaderBytes bounds a request's headers (default
// DefaultMaxHeaderBytes).
func WithMaxHeaderBytes(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxHeader = n
		}
	}
}

// WithMaxBodyBytes bounds a request's body (default DefaultMaxBodyBytes);
// a handler that reads more gets an *http.MaxBytesError.
func WithMaxBodyBytes(n int64) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxBody = n
		}
	}
}

// WithHosts adds names the listener answers to besides localhost and the
// loopback addresses ("name", any port, or "name:port"): the names a
// proxy in front of it or its operators use. With names given, every
// request must name one of them or a loopback name, on any listen
// address (see the request filter in filter.go).
func WithHosts(names ...string) Option {
	return func(s *Server) { s.hosts = append(s.hosts, names...) }
}

// WithStreamLimits bounds the long-lived responses (event streams, taps:
// see OpenStream): max open at once, perToken of them for one token or
// client certificate; 0 keeps the defaults (DefaultMaxStreams,
// DefaultMaxStreamsPerToken, at most max).
func WithStreamLimits(max, perToken int) Option {
	return func(s *Server) { s.streams.max, s.streams.perCaller = max, perToken }
}

// WithRedactor passes the strings of the status answers (/pipelines,
// the reasons of /readyz, and the routes that write with
// WriteRedactedJSON) through f: the daemon hides there what came into its
// config from ${file:} and ${ENV} (config.Config.Redact).
func WithRedactor(f func(string) string) Option { return func(s *Server) { s.redact = f } }
