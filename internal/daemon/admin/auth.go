package admin

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"net/http"
	"strconv"
	"strings"
)

// access is what a request needs.
type access int

const (
	// accessProbe: open when probes are open, else a read.
	accessProbe access = iota
	accessRead
	accessWrite
	// accessOpen: never needs a token (static files that hold no data).
	accessOpen
)

// route classifies requests: method ("" any) and path, a prefix when it
// ends in "/".
type route struct {
	method, path string
	need         access
}

// routes is the one table that says what every admin request needs; the
// first match wins. Mounted handlers (journal, fluid) need no code of
// their own: reads are GET and HEAD, everything else changes state.
var routes = []route{
	{"GET", "/healthz", accessProbe},
	{"GET", "/readyz", accessProbe},
	{"HEAD", "/healthz", accessProbe},
	{"HEAD", "/readyz", accessProbe},
	// pprof changes nothing, but a profile costs CPU for its duration and
	// goroutine dumps show the process's insides.
	{"", "/debug/pprof/", accessWrite},
	// The console's API needs a token like every other read; its static
	// files (HTML, JS, CSS: no data) are open, because a browser sends no
	// Authorization header when it navigates: the page asks for the token.
	{"GET", "/ui/api/", accessRead},
	{"HEAD", "/ui/api/", accessRead},
	{"GET", "/ui/", accessOpen},
	{"HEAD", "/ui/", accessOpen},
	// Fluid's protocol asks with GET, but these two change the bridge's
	// state: downgrade-topic registers the group's version and may start
	// republishing, downgrade-offset may start a new segment (a rewrite of
	// a partition). A fluid consumer's bridge_token needs role write.
	// GET /fluid/compatible stays a read: it may start republishing, but
	// only for groups already registered (through downgrade-topic) on C.
	{"GET", "/fluid/downgrade-topic", accessWrite},
	{"HEAD", "/fluid/downgrade-topic", accessWrite},
	{"GET", "/fluid/downgrade-offset", accessWrite},
	{"HEAD", "/fluid/downgrade-offset", accessWrite},
	{"GET", "/", accessRead},  // /pipelines, /metrics, GET /journal/..., GET /fluid/...
	{"HEAD", "/", accessRead}, // as GET
	{"", "/", accessWrite},    // POST /journal/... (append, delete, purge), DELETE /fluid/..., anything else
}

func classify(method, path string) access {
	for _, r := range routes {
		if r.method != "" && r.method != method {
			continue
		}
		if r.path == path || strings.HasSuffix(r.path, "/") && strings.HasPrefix(path, r.path) {
			return r.need
		}
	}
	return accessWrite
}

// guard wraps h with the body limit, the request filter (filter.go) and,
// when tokens are configured, the bearer-token check of routes; it logs
// every write with who made it, and tells h who that is (CallerOf).
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && s.maxBody > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		}
		need := classify(r.Method, r.URL.Path)
		if rf := s.filter(r, need); rf.code != 0 {
			s.refuse(w, r, rf.code, rf.what, rf.detail, "")
			return
		}
		c := &Caller{Cert: certSubject(r), srv: s}
		if s.tokens == nil {
			c.Role = RoleWrite // nothing to tell callers apart: the listener's reach is the limit
		}
		open := need == accessOpen || need == accessProbe && s.probesOpen
		auth := r.Header.Get("Authorization")
		scheme, token, ok := strings.Cut(auth, " ")
		token = strings.TrimSpace(token)
		bearer := ok && strings.EqualFold(scheme, "Bearer") && token != ""
		if s.tokens != nil && bearer {
			c.hash = sha256.Sum256([]byte(token))
			c.Token, c.Role = s.tokens.lookupHash(c.hash)
		}
		switch {
		case s.tokens == nil || open:
		case auth == "":
			s.refuse(w, r, http.StatusUnauthorized, "missing bearer token", "send the header Authorization: Bearer TOKEN with a token of role "+needRole(need)+" from [admin.auth] tokens_file", "")
			return
		case !bearer:
			s.refuse(w, r, http.StatusUnauthorized, "not a bearer token", "send the header Authorization: Bearer TOKEN (other schemes are not accepted)", "")
			return
		case c.Role == RoleNone && s.tokens.unavailable():
			s.refuse(w, r, http.StatusUnauthorized, "tokens file unavailable",
				"[admin.auth] tokens_file cannot be read now: every token is refused until it can be read again", "")
			return
		case c.Role == RoleNone:
			s.refuse(w, r, http.StatusUnauthorized, "unknown token", "the bearer token is not in [admin.auth] tokens_file (revoked, or mistyped)", "")
			return
		case need == accessWrite && c.Role < RoleWrite:
			s.refuse(w, r, http.StatusForbidden, "role write needed",
				"the token of "+strconv.Quote(c.Token)+" has role "+c.Role.String()+"; "+r.Method+" "+r.URL.Path+" needs a token of role write", c.Token)
			return
		}
		if rf := checkBody(r); rf.code != 0 {
			s.refuse(w, r, rf.code, rf.what, rf.detail, c.Token)
			return
		}
		if need == accessWrite || r.Method != http.MethodGet && r.Method != http.MethodHead {
			s.log.Info("admin write", append(c.logArgs(), "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)...)
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// Caller is who sent a request, as the admin server's guard found it.
type Caller struct {
	// Token is the name of the caller's bearer token ("" without one).
	Token string
	// Cert is the subject of the caller's client certificate (mutual
	// TLS), or "".
	Cert string
	// Role is what the caller may do: its token's role; without tokens
	// configured, RoleWrite (whoever reaches the listener may do
	// everything). RoleNone for a request on an open route (the probes,
	// the console's files) without a valid token.
	Role Role

	hash [sha256.Size]byte // of the token, for the streams' revocation check
	srv  *Server
}

type callerKey struct{}

// CallerOf returns who sent the request whose context ctx is, when the
// admin server's guard passed it.
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(*Caller)
	if !ok {
		return Caller{}, false
	}
	return *c, true
}

// String names the caller for a log line: its token, its certificate,
// or "anonymous".
func (c Caller) String() string {
	switch {
	case c.Token != "":
		return "token " + strconv.Quote(c.Token)
	case c.Cert != "":
		return "client certificate " + strconv.Quote(c.Cert)
	}
	return "anonymous"
}

// logArgs are the slog attributes that say who the caller is.
func (c *Caller) logArgs() []any {
	var args []any
	if c.Token != "" {
		args = append(args, "token", c.Token)
	}
	if c.Cert != "" {
		args = append(args, "client_cert", c.Cert)
	}
	if args == nil {
		args = append(args, "auth", "none")
	}
	return args
}

// certSubject is the subject of r's verified client certificate, or "".
func certSubject(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return ""
	}
	return r.TLS.VerifiedChains[0][0].Subject.String()
}

func needRole(a access) string {
	if a == accessWrite {
		return "write"
	}
	return "read or write"
}

// refuse answers code with {"error": what, "detail": detail} and logs the
// refusal (never the token).
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, code int, what, detail, name string) {
	args := []any{"status", code, "reason", what, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr}
	if name != "" {
		args = append(args, "token", name)
	}
	s.log.Warn("admin request refused", args...)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="streamd"`)
	}
	WriteJSON(w, code, map[string]string{"error": what, "detail": detail})
}

// mutualTLS reports whether c makes every client present a certificate
// its CAs verify.
func mutualTLS(c *tls.Config) bool {
	return c != nil && c.ClientAuth == tls.RequireAndVerifyClientCert && c.ClientCAs != nil
}
