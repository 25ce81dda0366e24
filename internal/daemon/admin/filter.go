package admin

import (
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// The request filter runs before the tokens, on every route, with tokens
// or without: it is what keeps a web page in the operator's browser from
// using the admin listener. Two attacks need nothing but a browser:
//
//   - DNS rebinding: a page on evil.example makes its name resolve to
//     127.0.0.1, and its script then reads and writes the listener as
//     its own origin (Host: evil.example:PORT). A listener reached over a
//     loopback address therefore answers only a Host that names it:
//     localhost, a loopback address, or a name of [admin] hosts.
//   - Cross-site requests: any page can send a POST to any address
//     ("no-cors" fetch, a form), without reading the answer. A write
//     (every method but GET and HEAD, and the GETs the route table says
//     change state) is refused when the browser says it comes from
//     another site (Sec-Fetch-Site) or another origin (Origin), and its
//     body must be JSON (application/json, or application/x-ndjson for
//     JSON lines): a page cannot send those types without the browser
//     asking first (a CORS preflight, which this server never grants).
//
// Command-line clients (curl, streamd ctl) send no Origin and no
// Sec-Fetch-Site, and pass; the console is served from the listener
// itself, so its requests are same-origin.

// refusal is why the filter refused a request, or "".
type refusal struct {
	code         int
	what, detail string
}

// filter checks r's Host and, for a write, its origin; it returns the
// refusal, or code 0.
func (s *Server) filter(r *http.Request, need access) refusal {
	if rf := s.checkHost(r); rf.code != 0 {
		return rf
	}
	write := need == accessWrite || r.Method != http.MethodGet && r.Method != http.MethodHead
	if !write {
		return refusal{}
	}
	switch site := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); site {
	case "cross-site", "same-site":
		return refusal{http.StatusForbidden, "cross-site request",
			"the browser says this request comes from another site (Sec-Fetch-Site: " + site + "); " + r.Method + " " + r.URL.Path +
				" changes state and is accepted only from the console on this listener or from a client that is not a browser"}
	}
	if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, ownOrigin(r)) {
		return refusal{http.StatusForbidden, "cross-origin request",
			"the request comes from a page of origin " + strconv.Quote(o) + ", not " + strconv.Quote(ownOrigin(r)) + "; " + r.Method + " " + r.URL.Path +
				" changes state and is accepted only from the console on this listener or from a client that is not a browser"}
	}
	return refusal{}
}

// checkBody refuses a write whose body is not JSON: the types a page may
// send anywhere without the browser asking first (text/plain, forms) and
// a body without a type. It runs after the tokens: a client without one
// learns that first.
func checkBody(r *http.Request) refusal {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return refusal{}
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && !hasBody(r) {
		return refusal{}
	}
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" && mt != "application/x-ndjson" {
		shown := strconv.Quote(ct)
		if ct == "" {
			shown = "none"
		}
		return refusal{http.StatusUnsupportedMediaType, "body must be JSON",
			r.Method + " " + r.URL.Path + " takes a body of Content-Type application/json (JSON lines: application/x-ndjson), or none; this one has Content-Type " + shown}
	}
	return refusal{}
}

// hasBody reports whether r comes with a body (of a length given, or
// chunked).
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 || len(r.TransferEncoding) > 0
}

// ownOrigin is the origin of a page served by this listener under the
// name r was sent to.
func ownOrigin(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// checkHost refuses a Host that does not name this listener, on a
// connection that came over loopback (or any connection, when [admin]
// hosts lists names).
func (s *Server) checkHost(r *http.Request) refusal {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	var port string
	loopback := true // not known: a handler called without a listener
	if ta, ok := local.(*net.TCPAddr); ok {
		loopback, port = ta.IP.IsLoopback(), strconv.Itoa(ta.Port)
	}
	if !loopback && len(s.hosts) == 0 {
		return refusal{}
	}
	if s.hostAllowed(r.Host, port, r.TLS != nil, loopback) {
		return refusal{}
	}
	names := "localhost, 127.0.0.1 or [::1]"
	if len(s.hosts) > 0 {
		names += " or " + strings.Join(s.hosts, ", ")
	}
	if port != "" {
		names = "(" + names + "):" + port
	}
	return refusal{http.StatusForbidden, "host not allowed",
		"this listener answers requests for " + names + ", not Host " + strconv.Quote(r.Host) +
			" (a page that made its own name point here, DNS rebinding, is refused this way); to reach it under another name, add the name to [admin] hosts"}
}

// hostAllowed reports whether Host names this listener: a loopback name
// or address, or the name of its listen address, with the listener's
// port (none: the scheme's default) on a loopback connection; an address
// on another connection; or one of s.hosts ("name": any port, or
// "name:port").
func (s *Server) hostAllowed(host, port string, tls, loopback bool) bool {
	name, hport, err := net.SplitHostPort(host)
	if err != nil {
		name, hport = strings.Trim(host, "[]"), ""
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == "" {
		return false
	}
	def := "80"
	if tls {
		def = "443"
	}
	portOK := port == "" || hport == port || hport == "" && port == def
	if loopback && portOK {
		if name == "localhost" || s.listenName != "" && strings.EqualFold(name, strings.TrimSuffix(s.listenName, ".")) {
			return true
		}
		if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
			return true
		}
	}
	if !loopback && net.ParseIP(name) != nil {
		// An address is no DNS name: nothing to rebind. Clients that
		// reach the listener by address (an orchestrator's probes) pass.
		return true
	}
	for _, h := range s.hosts {
		hn, hp, err := net.SplitHostPort(h)
		if err != nil {
			hn, hp = h, ""
		}
		if !strings.EqualFold(strings.Trim(hn, "[]"), name) {
			continue
		}
		// A name of the list is the operator's: its port does not matter
		// (a proxy in front sends its own), unless the entry names one.
		if hp == "" || hp == hport {
			return true
		}
	}
	return false
}
