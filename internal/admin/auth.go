package admin

import (
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

// guard wraps h with the body limit and, when tokens are configured, the
// bearer-token check of routes.
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && s.maxBody > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		}
		need := classify(r.Method, r.URL.Path)
		if s.tokens == nil || need == accessOpen || need == accessProbe && s.probesOpen {
			h.ServeHTTP(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		scheme, token, ok := strings.Cut(auth, " ")
		token = strings.TrimSpace(token)
		switch {
		case auth == "":
			s.refuse(w, r, http.StatusUnauthorized, "missing bearer token", "send the header Authorization: Bearer TOKEN with a token of role "+needRole(need)+" from [admin.auth] tokens_file", "")
			return
		case !ok || !strings.EqualFold(scheme, "Bearer") || token == "":
			s.refuse(w, r, http.StatusUnauthorized, "not a bearer token", "send the header Authorization: Bearer TOKEN (other schemes are not accepted)", "")
			return
		}
		name, role := s.tokens.Lookup(token)
		switch {
		case role == RoleNone:
			s.refuse(w, r, http.StatusUnauthorized, "unknown token", "the bearer token is not in [admin.auth] tokens_file (revoked, or mistyped)", "")
			return
		case need == accessWrite && role < RoleWrite:
			s.refuse(w, r, http.StatusForbidden, "role write needed",
				"the token of "+strconv.Quote(name)+" has role "+role.String()+"; "+r.Method+" "+r.URL.Path+" needs a token of role write", name)
			return
		}
		if need == accessWrite {
			s.log.Info("admin write", "token", name, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		}
		h.ServeHTTP(w, r)
	})
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
