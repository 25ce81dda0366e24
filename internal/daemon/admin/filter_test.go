package admin

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/x/tlsconf"
)

// call is one request to a started server, with the headers a browser
// (or an attacker's page) would send.
type call struct {
	method, path, host, origin, site, ctype, token, body string
}

func (c call) do(t *testing.T, addr string) (int, string) {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, "http://"+addr+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.host != "" {
		req.Host = c.host
	}
	if c.origin != "" {
		req.Header.Set("Origin", c.origin)
	}
	if c.site != "" {
		req.Header.Set("Sec-Fetch-Site", c.site)
	}
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestRequestFilter: on a loopback listener without tokens (the
// quickstart's), a Host that is not the listener's own (DNS rebinding)
// is refused for every route, and a write from another origin (Origin,
// Sec-Fetch-Site) or with a body a page can send without asking (a
// "simple" content type) is refused; the console's own requests (same
// origin, JSON) and a command-line client's (no Origin) pass.
func TestRequestFilter(t *testing.T) {
	var logs bytes.Buffer
	s := newServer(slog.New(slog.NewTextHandler(&logs, nil)))
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	own := "http://" + addr
	purge := "/journal/orders/o-1/purge"
	for _, tc := range []struct {
		name string
		c    call
		code int
	}{
		{"status, as curl", call{method: "GET", path: "/pipelines"}, 200},
		{"status, Host localhost", call{method: "GET", path: "/pipelines", host: "localhost:" + port}, 200},
		{"status, Host [::1]", call{method: "GET", path: "/pipelines", host: "[::1]:" + port}, 200},
		{"status, rebinding Host", call{method: "GET", path: "/pipelines", host: "evil.example:" + port}, 403},
		{"healthz, rebinding Host", call{method: "GET", path: "/healthz", host: "evil.example:" + port}, 403},
		{"console page, rebinding Host", call{method: "GET", path: "/ui/", host: "evil.example:" + port}, 403},
		{"pprof, rebinding Host", call{method: "GET", path: "/debug/pprof/", host: "evil.example:" + port}, 403},
		{"status, loopback name on another port", call{method: "GET", path: "/pipelines", host: "localhost:1"}, 403},
		{"purge, as curl (no Origin)", call{method: "POST", path: purge}, 200},
		{"purge, same origin", call{method: "POST", path: purge, origin: own, site: "same-origin"}, 200},
		{"purge, cross-site page", call{method: "POST", path: purge, origin: "http://evil.example", site: "cross-site"}, 403},
		{"purge, Origin of another site only", call{method: "POST", path: purge, origin: "http://evil.example"}, 403},
		{"purge, Origin null", call{method: "POST", path: purge, origin: "null"}, 403},
		{"purge, Sec-Fetch-Site cross-site only", call{method: "POST", path: purge, site: "cross-site"}, 403},
		{"purge, same-site (another port of localhost)", call{method: "POST", path: purge, origin: "http://localhost:3000", site: "same-site"}, 403},
		{"purge, rebinding Host with its own Origin", call{method: "POST", path: purge, host: "evil.example:" + port, origin: "http://evil.example:" + port, site: "same-origin"}, 403},
		{"fluid state-changing GET from another site", call{method: "GET", path: "/fluid/downgrade-topic?topic=t", site: "cross-site"}, 403},
		{"append, text/plain body", call{method: "POST", path: "/journal/orders/o-1", ctype: "text/plain", body: "{}"}, 415},
		{"append, form body", call{method: "POST", path: "/journal/orders/o-1", ctype: "application/x-www-form-urlencoded", body: "a=b"}, 415},
		{"append, body without a type", call{method: "POST", path: "/journal/orders/o-1", body: "{}"}, 415},
		{"append, JSON", call{method: "POST", path: "/journal/orders/o-1", ctype: "application/json", body: "{}"}, 200},
		{"append, JSON lines", call{method: "POST", path: "/journal/orders/o-1", ctype: "application/x-ndjson", body: "{}\n"}, 200},
		{"replay, text/plain (a no-cors fetch)", call{method: "POST", path: "/ui/api/dlq/p/replay", ctype: "text/plain;charset=UTF-8", body: "{}"}, 415},
		{"replay, JSON, same origin", call{method: "POST", path: "/ui/api/dlq/p/replay", origin: own, site: "same-origin", ctype: "application/json", body: "{}"}, 200},
		{"pause, empty body typed text/plain", call{method: "POST", path: "/v1/pipelines/orders/pause", ctype: "text/plain"}, 415},
	} {
		code, body := tc.c.do(t, addr)
		if code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.code)
		}
	}
	if !strings.Contains(logs.String(), "admin write") || !strings.Contains(logs.String(), "auth=none") {
		t.Errorf("writes without auth are not logged as such:\n%s", logs.String())
	}
}

// TestRequestFilterHosts: [admin] hosts adds names the listener answers
// to (a proxy's), with any port or the one given; other names stay
// refused.
func TestRequestFilterHosts(t *testing.T) {
	s := newServer(nil, WithHosts("admin.example.com", "ops.example.com:8443"))
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	for _, tc := range []struct {
		host string
		code int
	}{
		{"admin.example.com", 200},
		{"ADMIN.example.com.:443", 200},
		{"ops.example.com:8443", 200},
		{"ops.example.com", 403},
		{"evil.example.com", 403},
		{"example.com", 403},
	} {
		if code, body := (call{method: "GET", path: "/pipelines", host: tc.host}).do(t, addr); code != tc.code {
			t.Errorf("Host %s: %d %s, want %d", tc.host, code, body, tc.code)
		}
	}
}

// TestWriteLoggedWithCertSubject: on a mutual-TLS listener without
// tokens, a write is logged with the subject of the client certificate
// that made it.
func TestWriteLoggedWithCertSubject(t *testing.T) {
	certs := testenv.NewCerts(t)
	mtls, err := tlsconf.Server(tlsconf.Files{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, CAFile: certs.CA})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := newServer(slog.New(slog.NewTextHandler(&logs, nil)), WithTLS(mtls))
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	tc, err := tlsconf.Client(tlsconf.Files{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	res, err := cl.Post("https://"+addr+"/journal/orders/o-1/purge", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("purge: %s", res.Status)
	}
	if !strings.Contains(logs.String(), "admin write") || !strings.Contains(logs.String(), `client_cert="CN=streamd-client"`) {
		t.Fatalf("the write is not logged with the certificate's subject:\n%s", logs.String())
	}
}

// TestRequestFilterHostsOtherInterface: with [admin] hosts, a connection
// that did not come over loopback must name one of them too, or be sent to
// an address (an orchestrator's probe): an address is not a DNS name that
// could be made to point here.
func TestRequestFilterHostsOtherInterface(t *testing.T) {
	var ip net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Skip("no address but loopback on this machine")
	}
	s := newServer(nil, WithHosts("admin.example.com"), WithTokens(tokens(t)))
	addr, err := s.Start(net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	_, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		host string
		code int
	}{
		{"admin.example.com", 200},
		{addr, 200},
		{"evil.example:" + port, 403},
	} {
		if code, body := (call{method: "GET", path: "/healthz", host: tc.host}).do(t, addr); code != tc.code {
			t.Errorf("Host %s over %s: %d %s, want %d", tc.host, ip, code, body, tc.code)
		}
	}
}
