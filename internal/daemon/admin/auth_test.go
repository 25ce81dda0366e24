package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/x/tlsconf"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

const (
	readToken  = "r-0123456789abcdef-read"
	writeToken = "w-0123456789abcdef-write"
)

func writeTokens(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func tokens(t *testing.T) *Tokens {
	t.Helper()
	toks, err := LoadTokens(writeTokens(t, "# role name token\nread grafana "+readToken+"\n\nwrite deployer "+writeToken+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// newServer is a server with a fake journal and fluid mounted: each
// answers 200 with what it was asked.
func newServer(log *slog.Logger, opts ...Option) *Server {
	s := New(prometheus.NewRegistry(), func() []*pipeline.Pipeline { return nil }, log, opts...)
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, "too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
	})
	s.Handle("/journal/", echo)
	s.Handle("/fluid/", echo)
	s.Handle("/ui/", echo)
	return s
}

func TestClassify(t *testing.T) {
	tests := []struct {
		method, path string
		want         access
	}{
		{"GET", "/healthz", accessProbe},
		{"GET", "/readyz", accessProbe},
		{"HEAD", "/readyz", accessProbe},
		{"POST", "/healthz", accessWrite},
		{"GET", "/pipelines", accessRead},
		{"GET", "/v1/status", accessRead},
		{"GET", "/v1/pipelines/orders", accessRead},
		{"POST", "/v1/reload", accessWrite},
		{"POST", "/v1/pipelines/orders/pause", accessWrite},
		{"POST", "/v1/pipelines/orders/restart", accessWrite},
		{"GET", "/metrics", accessRead},
		{"GET", "/journal/orders/o-1", accessRead},
		{"GET", "/journal/orders/o-1/pointer", accessRead},
		{"POST", "/journal/orders/o-1", accessWrite},
		{"POST", "/journal/orders/o-1/delete", accessWrite},
		{"POST", "/journal/orders/o-1/purge", accessWrite},
		{"GET", "/fluid/status", accessRead},
		{"GET", "/fluid/compatible", accessRead},
		{"GET", "/fluid/downgrade-topic", accessWrite},
		{"GET", "/fluid/downgrade-offset", accessWrite},
		{"GET", "/ui/", accessOpen},
		{"GET", "/ui/app.js", accessOpen},
		{"HEAD", "/ui/", accessOpen},
		{"GET", "/ui/api/status", accessRead},
		{"GET", "/ui/api/events", accessRead},
		{"POST", "/ui/api/dlq/p/replay", accessWrite},
		{"POST", "/ui/", accessWrite},
		{"DELETE", "/fluid/topics/t/groups/g/schema-version", accessWrite},
		{"PUT", "/anything", accessWrite},
		{"OPTIONS", "/pipelines", accessWrite},
		{"GET", "/debug/pprof/", accessWrite},
		{"GET", "/debug/pprof/profile", accessWrite},
	}
	for _, tc := range tests {
		if got := classify(tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}

type answer struct {
	code int
	body string
	json map[string]string
}

func do(t *testing.T, h http.Handler, method, path, token string, body io.Reader) answer {
	t.Helper()
	req := httptest.NewRequest(method, path, body)
	req.Host = "127.0.0.1" // the listener's own (httptest's example.com is refused)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	a := answer{code: rec.Code, body: rec.Body.String()}
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s: JSON answer %s is not JSON", method, path, a.body)
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &a.json) // an error's {"error", "detail"}
	}
	return a
}

// TestTokens: without a token 401, with a read token a
// journal purge is 403, with a write token it works; reads need a read
// token; probes stay open unless told otherwise; every refusal is JSON
// naming what is missing, and no log line has a token.
func TestTokens(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	h := newServer(log, WithTokens(tokens(t))).Handler()
	purge := "/journal/orders/o-1/purge"
	tests := []struct {
		name, method, path, token string
		code                      int
		err                       string // the JSON error, for refusals
	}{
		{"purge without a token", "POST", purge, "", 401, "missing bearer token"},
		{"purge with a read token", "POST", purge, readToken, 403, "role write needed"},
		{"purge with a write token", "POST", purge, writeToken, 200, ""},
		{"purge with an unknown token", "POST", purge, "x-0123456789abcdef-unknown", 401, "unknown token"},
		{"journal read without a token", "GET", "/journal/orders/o-1", "", 401, "missing bearer token"},
		{"journal read with a read token", "GET", "/journal/orders/o-1", readToken, 200, ""},
		{"journal read with a write token", "GET", "/journal/orders/o-1", writeToken, 200, ""},
		{"fluid DELETE with a read token", "DELETE", "/fluid/topics/t/groups/g/schema-version", readToken, 403, "role write needed"},
		{"fluid DELETE with a write token", "DELETE", "/fluid/topics/t/groups/g/schema-version", writeToken, 200, ""},
		{"status with a read token", "GET", "/pipelines", readToken, 200, ""},
		{"metrics without a token", "GET", "/metrics", "", 401, "missing bearer token"},
		{"pprof with a read token", "GET", "/debug/pprof/", readToken, 403, "role write needed"},
		{"healthz without a token", "GET", "/healthz", "", 200, ""},
		{"console page without a token", "GET", "/ui/", "", 200, ""},
		{"console script without a token", "GET", "/ui/app.js", "", 200, ""},
		{"console API without a token", "GET", "/ui/api/status", "", 401, "missing bearer token"},
		{"console API with a read token", "GET", "/ui/api/status", readToken, 200, ""},
		{"console replay with a read token", "POST", "/ui/api/dlq/p/replay", readToken, 403, "role write needed"},
		{"console replay with a write token", "POST", "/ui/api/dlq/p/replay", writeToken, 200, ""},
		{"fluid downgrade-topic with a read token", "GET", "/fluid/downgrade-topic?topic=t", readToken, 403, "role write needed"},
		{"fluid downgrade-topic with a write token", "GET", "/fluid/downgrade-topic?topic=t", writeToken, 200, ""},
		{"fluid downgrade-offset with a read token", "GET", "/fluid/downgrade-offset?topic=t", readToken, 403, "role write needed"},
		{"fluid compatible with a read token", "GET", "/fluid/compatible?topic=t", readToken, 200, ""},
		{"readyz without a token", "GET", "/readyz", "", 200, ""},
	}
	for _, tc := range tests {
		a := do(t, h, tc.method, tc.path, tc.token, nil)
		if a.code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, a.code, a.body, tc.code)
			continue
		}
		if tc.err != "" && (a.json["error"] != tc.err || a.json["detail"] == "") {
			t.Errorf("%s: body %s, want JSON error %q with a detail", tc.name, a.body, tc.err)
		}
	}
	a := do(t, h, "POST", purge, readToken, nil)
	if d := a.json["detail"]; !strings.Contains(d, `"grafana"`) || !strings.Contains(d, "role read") || !strings.Contains(d, "needs a token of role write") {
		t.Errorf("403 detail %q: want the token's name, its role and the role needed", d)
	}
	req := httptest.NewRequest("GET", "/pipelines", nil)
	req.Host = "localhost"
	req.Header.Set("Authorization", "Basic "+readToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("basic auth: %d, WWW-Authenticate %q; want 401 with a challenge", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
	closed := newServer(log, WithTokens(tokens(t)), WithProbesOpen(false)).Handler()
	if a := do(t, closed, "GET", "/readyz", "", nil); a.code != 401 {
		t.Errorf("probes_open = false: readyz without a token %d, want 401", a.code)
	}
	if a := do(t, closed, "GET", "/readyz", readToken, nil); a.code != 200 {
		t.Errorf("probes_open = false: readyz with a read token %d, want 200", a.code)
	}
	for _, tok := range []string{readToken, writeToken} {
		if strings.Contains(logs.String(), tok) || strings.Contains(logs.String(), tok[2:]) {
			t.Fatalf("a token is in the log:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "admin request refused") || !strings.Contains(logs.String(), "token=grafana") {
		t.Errorf("refusals are not logged with the token's name:\n%s", logs.String())
	}
}

// TestTokensFile: a bad line is named by file and line, never with its
// fields (a token written first would be logged); rotation and
// revocation through the file need no restart, seen within a second.
func TestTokensFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		secret := "s3cr3t-0123456789abcdef"
		for _, tc := range []struct{ name, content, want string }{
			{"token first", secret + " read grafana\n", ":1: the role (first field) must be read or write"},
			{"two fields", "read " + secret + "\n", ":1: want ROLE NAME TOKEN"},
			{"short", "# x\nread grafana short-" + "\n", ":2: the token (third field) is 6 characters; use at least 16"},
			{"duplicate", "read a " + secret + "\nwrite b " + secret + "\n", ":2: the token is the token of line 1 too"},
			{"empty", "# nothing\n", "no tokens in it"},
		} {
			_, err := LoadTokens(writeTokens(t, tc.content), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			} else if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "short-") {
				t.Errorf("%s: the error has the token: %v", tc.name, err)
			}
		}
		if _, err := LoadTokens(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
			t.Error("a missing tokens file loaded")
		}

		path := writeTokens(t, "read a "+readToken+"\n")
		var logs bytes.Buffer
		toks, err := LoadTokens(path, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if _, r := toks.Lookup(readToken); r != RoleRead {
			t.Fatalf("role %v", r)
		}
		rewrite := func(content string) {
			t.Helper()
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			// A different mtime and size.
			later := time.Now().Add(time.Duration(len(content)) * time.Second)
			if err := os.Chtimes(path, later, later); err != nil {
				t.Fatal(err)
			}
		}
		rewrite("write a " + writeToken + "\n")
		// Looked at once a second at most: the old file still counts until
		// the interval has passed (the fake clock of synctest).
		time.Sleep(tokensCheckInterval - time.Millisecond)
		if _, r := toks.Lookup(readToken); r != RoleRead {
			t.Errorf("the file was read again %v after the last check: role %v", tokensCheckInterval-time.Millisecond, r)
		}
		time.Sleep(time.Millisecond)
		if _, r := toks.Lookup(readToken); r != RoleNone {
			t.Errorf("a removed token still has role %v", r)
		}
		if name, r := toks.Lookup(writeToken); r != RoleWrite || name != "a" {
			t.Errorf("a rotated-in token: %q %v", name, r)
		}
		// A typo on reload: the good lines count, the bad one gives nothing.
		rewrite("write a " + writeToken + "\nread b\n")
		time.Sleep(tokensCheckInterval)
		if _, r := toks.Lookup(writeToken); r != RoleWrite {
			t.Errorf("after a bad line: the good token has role %v", r)
		}
		if !strings.Contains(logs.String(), ":2: want ROLE NAME TOKEN") {
			t.Errorf("the bad line is not logged:\n%s", logs.String())
		}
		if strings.Contains(logs.String(), writeToken) {
			t.Fatalf("a token is in the log:\n%s", logs.String())
		}
	})
}

// TestBodyLimit: a body over max_body_bytes is cut off with a
// *http.MaxBytesError the handler turns into 413.
func TestBodyLimit(t *testing.T) {
	h := newServer(nil, WithMaxBodyBytes(1024)).Handler()
	if a := do(t, h, "POST", "/journal/t/i", "", strings.NewReader(strings.Repeat("x", 1024))); a.code != 200 {
		t.Errorf("1024 bytes: %d %s", a.code, a.body)
	}
	if a := do(t, h, "POST", "/journal/t/i", "", strings.NewReader(strings.Repeat("x", 1025))); a.code != 413 {
		t.Errorf("1025 bytes: %d %s, want 413", a.code, a.body)
	}
}

// TestExposedListenRefused: a listen address that is not
// loopback is refused at start without auth, with a message saying how
// to configure it; tokens, mutual TLS or allow_unauthenticated let it
// start.
func TestExposedListenRefused(t *testing.T) {
	certs := testenv.NewCerts(t)
	mtls, err := tlsconf.Server(tlsconf.Files{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, CAFile: certs.CA})
	if err != nil {
		t.Fatal(err)
	}
	onlyTLS, err := tlsconf.Server(tlsconf.Files{CertFile: certs.ServerCert, KeyFile: certs.ServerKey})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		addr   string
		opts   []Option
		refuse bool
	}{
		{"all interfaces, no auth", "0.0.0.0:0", nil, true},
		{"all interfaces (empty host), no auth", ":0", nil, true},
		{"all interfaces, TLS without client CA", "0.0.0.0:0", []Option{WithTLS(onlyTLS)}, true},
		{"loopback, no auth", "127.0.0.1:0", nil, false},
		{"all interfaces, tokens", "0.0.0.0:0", []Option{WithTokens(tokens(t))}, false},
		{"all interfaces, mutual TLS", "0.0.0.0:0", []Option{WithTLS(mtls)}, false},
		{"all interfaces, allow_unauthenticated", "0.0.0.0:0", []Option{WithAllowUnauthenticated(true)}, false},
	} {
		s := newServer(nil, tc.opts...)
		addr, err := s.Start(tc.addr)
		if tc.refuse {
			if err == nil {
				shutdown(t, s)
				t.Errorf("%s: started on %s", tc.name, addr)
				continue
			}
			for _, want := range []string{"not a loopback address", "[admin.auth] tokens_file", "client_ca_file", "allow_unauthenticated = true"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %v\nwant it to say %q", tc.name, err, want)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		shutdown(t, s)
	}
}

// TestSlowHeadersCutOff: a client that sends its headers
// one byte a second is cut off by the header timeout, long before it
// finishes.
func TestSlowHeadersCutOff(t *testing.T) {
	// The whole-request timeout is far away: the header timeout is what
	// must act.
	s := newServer(nil, WithTimeouts(Timeouts{ReadHeader: time.Second, Read: 10 * time.Minute}))
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(conn.Close)
	req := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 40) + "\r\n\r\n"
	start := time.Now()
	sent := 0
	cut := false
	for sent < len(req) {
		if _, err := conn.Write([]byte{req[sent]}); err != nil {
			cut = true
			break
		}
		sent++
		// Between bytes, see whether the server has hung up (the 408 it
		// writes, then EOF).
		if err := conn.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 512)
		n, err := conn.Read(buf)
		if n > 0 || err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			cut = true
			break
		}
	}
	took := time.Since(start)
	if !cut {
		t.Fatalf("the server read all %d header bytes sent one a second (%s) without cutting the client off", len(req), took.Round(time.Second))
	}
	if took < 500*time.Millisecond || took > 20*time.Second || sent >= len(req) {
		t.Fatalf("cut off after %s and %d of %d bytes: want soon after the 1s header timeout, before the end", took, sent, len(req))
	}
	t.Logf("cut off after %s, %d of %d header bytes sent", took.Round(100*time.Millisecond), sent, len(req))
}

// TestAdminTLSWithCurl: the admin listener over TLS works
// with curl given the CA; with a client CA, curl without a client
// certificate is refused and with one it gets through.
func TestAdminTLSWithCurl(t *testing.T) {
	curl := testenv.Tool(t, "curl")
	certs := testenv.NewCerts(t)
	run := func(args ...string) (string, error) {
		out, err := exec.Command(curl, append([]string{"-sS", "--max-time", "20"}, args...)...).CombinedOutput()
		return string(out), err
	}
	tc, err := tlsconf.Server(tlsconf.Files{CertFile: certs.ServerCert, KeyFile: certs.ServerKey})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(nil, WithTLS(tc), WithTokens(tokens(t)))
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	url := "https://" + addr
	if out, err := run("--cacert", certs.CA, url+"/healthz"); err != nil || !strings.Contains(out, `"ok"`) {
		t.Fatalf("curl --cacert: %v %s", err, out)
	}
	if out, err := run("--cacert", certs.CA, "-H", "Authorization: Bearer "+readToken, url+"/pipelines"); err != nil || strings.Contains(out, "error") {
		t.Fatalf("curl --cacert with a token: %v %s", err, out)
	}
	if out, err := run("--cacert", certs.OtherCA, url+"/healthz"); err == nil {
		t.Fatalf("curl trusting another CA got through: %s", out)
	}
	if out, err := run(url + "/healthz"); err == nil {
		t.Fatalf("curl without the CA got through: %s", out)
	}

	mtls, err := tlsconf.Server(tlsconf.Files{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, CAFile: certs.CA})
	if err != nil {
		t.Fatal(err)
	}
	m := newServer(nil, WithTLS(mtls))
	maddr, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, m)
	murl := "https://" + maddr + "/pipelines"
	if out, err := run("--cacert", certs.CA, murl); err == nil {
		t.Fatalf("mutual TLS: curl without a client certificate got through: %s", out)
	}
	if out, err := run("--cacert", certs.CA, "--cert", certs.OtherCert, "--key", certs.OtherKey, murl); err == nil {
		t.Fatalf("mutual TLS: a certificate of another CA got through: %s", out)
	}
	if out, err := run("--cacert", certs.CA, "--cert", certs.ClientCert, "--key", certs.ClientKey, murl); err != nil {
		t.Fatalf("mutual TLS with a client certificate: %v %s", err, out)
	}
}

// TestInProcess: the process's own clients (a fluid consumer whose bridge
// is this server) are served without the network and without a token,
// while the same request from outside needs one.
func TestInProcess(t *testing.T) {
	s := newServer(nil, WithTokens(tokens(t)), WithMaxBodyBytes(1024))
	cl := &http.Client{Transport: s.InProcess()}
	resp, err := cl.Get("http://streamd.in-process/fluid/compatible?x=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "GET /fluid/compatible" {
		t.Fatalf("in process: %d %q", resp.StatusCode, b)
	}
	resp, err = cl.Post("http://streamd.in-process/journal/t/i", "text/plain", strings.NewReader(strings.Repeat("x", 2000)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 413 {
		t.Fatalf("in process, a body over the limit: %d", resp.StatusCode)
	}
	if a := do(t, s.Handler(), "GET", "/fluid/compatible", "", nil); a.code != 401 {
		t.Fatalf("from outside without a token: %d", a.code)
	}
}

// FuzzParseTokens: any tokens file parses without a panic, and its errors
// never quote a field of it (a token written in the wrong place would be
// logged).
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte("read grafana " + readToken + "\nwrite deployer " + writeToken + "\n"))
	f.Add([]byte(readToken + " read x\n# c\n\nread y short\nwrite a b c d\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := parseTokens("tokens", b)
		for _, e := range entries {
			if e.role != RoleRead && e.role != RoleWrite {
				t.Fatalf("entry with role %v", e.role)
			}
		}
		if err == nil {
			return
		}
		msg := strings.TrimPrefix(err.Error(), "tokens")
		// The messages' own words are not quotes of the file.
		const own = "tokens:: want ROLE NAME TOKEN (3 fields separated by spaces), not fields the role (first field) must be read or write " +
			"the token (third field) is characters; use at least (e.g. openssl rand -hex 32) the token is the token of line too: give each its own"
		for _, line := range strings.Split(string(b), "\n") {
			for _, field := range strings.Fields(line) {
				if len(field) >= 8 && !strings.Contains(own, field) && strings.Contains(msg, field) {
					t.Fatalf("the error quotes %q: %v", field, err)
				}
			}
		}
	})
}

// shutdown stops s and fails t unless it stops cleanly.
func shutdown(t testing.TB, s interface{ Shutdown(context.Context) error }) {
	t.Helper()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// TestTokensFileSameSizeAndTime: a rotation that keeps the file's size
// and modification time (a restore, cp -p, a configuration tool) is seen:
// the revoked token is refused and the new one accepted.
func TestTokensFileSameSizeAndTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oldTok, newTok := "r-0123456789abcdef-old1", "r-0123456789abcdef-new2"
		path := writeTokens(t, "read a "+oldTok+"\n")
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		toks, err := LoadTokens(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("read a "+newTok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if _, r := toks.Lookup(oldTok); r != RoleNone {
			t.Errorf("the revoked token still has role %v", r)
		}
		if _, r := toks.Lookup(newTok); r != RoleRead {
			t.Errorf("the new token has role %v", r)
		}
	})
}

// TestTokensFileMissingFailsClosed: while the tokens file is missing,
// every token is refused (deleting the file revokes them all), logged
// once; when it is back, its tokens count again.
func TestTokensFileMissingFailsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := writeTokens(t, "read a "+readToken+"\nwrite b "+writeToken+"\n")
		var logs bytes.Buffer
		toks, err := LoadTokens(path, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		content, _ := os.ReadFile(path)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			time.Sleep(time.Second)
			for _, tok := range []string{readToken, writeToken} {
				if _, r := toks.Lookup(tok); r != RoleNone {
					t.Fatalf("the tokens file is gone, and a token has role %v", r)
				}
			}
		}
		if n := strings.Count(logs.String(), "cannot be read"); n != 1 {
			t.Errorf("the missing file is logged %d times, want once:\n%s", n, logs.String())
		}
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if _, r := toks.Lookup(writeToken); r != RoleWrite {
			t.Errorf("the file is back, and its write token has role %v", r)
		}
	})
}

// unreadySource never connects: its Ready fails with an error that names
// a broker and a user.
type unreadySource struct{}

func (unreadySource) Ready(context.Context) error {
	return errors.New("dial tcp 10.9.8.7:9092: SASL user alice: connection refused")
}
func (unreadySource) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (unreadySource) Ack([]pipeline.Msg)           {}
func (unreadySource) Commit(context.Context) error { return nil }
func (unreadySource) Close(context.Context) error  { return nil }

// TestReadyzOpenSaysLittle: with tokens and the probes open, /readyz
// without a token says only that a pipeline is not ready and which; the
// reason (a broker address, a user name, an error's text) needs a read
// token.
func TestReadyzOpenSaysLittle(t *testing.T) {
	p := pipeline.New("orders", unreadySource{}, plugins.SinkFunc(func(_ context.Context, b []record.Record) ([]error, error) {
		return make([]error, len(b)), nil
	}), pipeline.WithRetry(10*time.Millisecond, 10*time.Millisecond, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for p.Status().Reason == "" || !strings.Contains(p.Status().Reason, "alice") {
		time.Sleep(10 * time.Millisecond)
	}
	s := New(prometheus.NewRegistry(), func() []*pipeline.Pipeline { return []*pipeline.Pipeline{p} }, nil, WithTokens(tokens(t)))
	h := s.Handler()
	a := do(t, h, "GET", "/readyz", "", nil)
	if a.code != 503 || !strings.Contains(a.body, `"orders"`) {
		t.Fatalf("readyz without a token: %d %s; want 503 naming the pipeline", a.code, a.body)
	}
	for _, secret := range []string{"10.9.8.7", "alice", "connection refused", "reasons"} {
		if strings.Contains(a.body, secret) {
			t.Errorf("readyz without a token says %q:\n%s", secret, a.body)
		}
	}
	if a := do(t, h, "GET", "/readyz", readToken, nil); a.code != 503 || !strings.Contains(a.body, "alice") {
		t.Errorf("readyz with a read token: %d %s; want the reason", a.code, a.body)
	}
	if a := do(t, newServer(nil).Handler(), "GET", "/readyz", "", nil); a.code != 200 {
		t.Errorf("readyz of no pipeline: %d", a.code)
	}
}
