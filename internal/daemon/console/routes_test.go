package console_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// routeDaemon is a daemon with every kind of route mounted: the admin
// server's own, the control API, the console, the journal and a fluid
// bridge; with tokens when tokens is set.
func routeDaemon(t *testing.T, tokens string) (*daemon, string) {
	t.Helper()
	b := testenv.Kafka(t)
	dir := t.TempDir()
	journalTopic, src, dlqTopic, fluidTopic := testenv.Topic(t, "journal"), testenv.Topic(t, "payments"), testenv.Topic(t, "dlq"), testenv.Topic(t, "fluid")
	for _, tp := range []string{journalTopic, src, dlqTopic, fluidTopic} {
		b.CreateTopic(t, tp, 1)
	}
	meta := filepath.Join(dir, ".fluid", "v1")
	if err := os.MkdirAll(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(meta, "orders.json"), []byte(`{"type":"object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(meta, "manifest.json"), []byte(fmt.Sprintf(`{"topics":{%q:{"schema":"orders.json"}}}`, fluidTopic)), 0o644); err != nil {
		t.Fatal(err)
	}
	auth := ""
	if tokens != "" {
		auth = fmt.Sprintf("[admin.auth]\ntokens_file = %q\n", tokens)
	}
	return startDaemonAdmin(t, "max_streams = 10000\nmax_streams_per_token = 10000\n", fmt.Sprintf(`
[kafka]
brokers = [%q]
[journal]
store = "sqlite:%s"
[fluid]
metadata = %q
state_topic = %q

[[pipeline]]
name = "payments"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "payments"
[pipeline.sink]
type = "drop"
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
%s`, b.Seeds[0], filepath.Join(dir, "journal.db"), filepath.Join(dir, ".fluid"), testenv.Topic(t, "fluid-state"), src, dlqTopic, auth)), journalTopic
}

// A request's variations.
const (
	tokNone, tokRead, tokWrite, tokRevoked = "no token", "read token", "write token", "revoked token"
	originNone, originSame, originCross    = "no Origin", "same origin", "another site"
	ctNone, ctJSON, ctText                 = "no body", "JSON body", "text/plain body"
)

var tokenValue = map[string]string{
	tokRead:    "r-route-0123456789abcdef",
	tokWrite:   "w-route-0123456789abcdef",
	tokRevoked: "x-route-0123456789abcdef",
}

// wildcards are the values that stand for a pattern's {wildcards}
// ({topic}: a topic of the daemon's).
var wildcards = map[string]string{
	"name": "payments", "p": "payments", "action": "pause", "id": "1", "group": "g",
	"partition": "0", "offset": "0", "stage": "s",
}

var wildcardRE = regexp.MustCompile(`\{([a-z]+)(\.\.\.)?\}`)

// routeRequest is a pattern's method (or the methods a path alone is
// tried with) and path with its wildcards filled in.
func routeRequest(t *testing.T, pattern, topic string) ([]string, string) {
	t.Helper()
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "", pattern
	}
	var missing []string
	path = wildcardRE.ReplaceAllStringFunc(path, func(m string) string {
		name := wildcardRE.FindStringSubmatch(m)[1]
		v, ok := wildcards[name]
		if name == "topic" {
			v, ok = topic, true
		}
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		t.Fatalf("route %q: no value for {%s}: add one to wildcards", pattern, strings.Join(missing, "}, {"))
	}
	if strings.HasSuffix(path, "/profile") || strings.HasSuffix(path, "/trace") {
		path += "?seconds=1"
	}
	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE"}
	if method != "" {
		methods = []string{method}
		if method == "GET" {
			methods = append(methods, "POST") // a write to a read route
		} else {
			methods = append(methods, "GET")
		}
	}
	return methods, path
}

// need is what a request needs, by the rules the admin server must
// follow: the probes, the console's files (open), writes (every method
// but GET and HEAD, and the GETs that change state) and reads.
func need(method, path string) string {
	get := method == "GET" || method == "HEAD"
	p, _, _ := strings.Cut(path, "?")
	switch {
	case get && (p == "/healthz" || p == "/readyz"):
		return "probe"
	case get && strings.HasPrefix(p, "/ui/") && !strings.HasPrefix(p, "/ui/api/"):
		return "open"
	case !get, p == "/fluid/downgrade-topic", p == "/fluid/downgrade-offset", strings.HasPrefix(p, "/debug/pprof/"):
		return "write"
	}
	return "read"
}

// answer is what a request must get: a refusal of the guard (code and
// its JSON error), or code 0: it passes the guard to the route (whose
// answer is its own).
type answer struct {
	code int
	err  string
}

func expected(method, path, tok string, goodHost bool, origin, ct string, tokens bool) answer {
	n := need(method, path)
	switch {
	case !goodHost:
		return answer{403, "host not allowed"}
	case n == "write" && origin == originCross:
		return answer{403, "cross-site request"}
	}
	if tokens && n != "open" && n != "probe" {
		switch {
		case tok == tokNone:
			return answer{401, "missing bearer token"}
		case tok == tokRevoked:
			return answer{401, "unknown token"}
		case n == "write" && tok == tokRead:
			return answer{403, "role write needed"}
		}
	}
	if method != "GET" && method != "HEAD" && ct == ctText {
		return answer{415, "body must be JSON"}
	}
	return answer{}
}

// guardErrors are the errors of the guard's refusals: an answer that
// passed it has none of them.
var guardErrors = []string{"host not allowed", "cross-site request", "cross-origin request", "missing bearer token", "not a bearer token",
	"unknown token", "role write needed", "body must be JSON", "tokens file unavailable"}

// TestEveryRouteGuarded walks the daemon's registered routes (the admin
// server's Routes: its own, the control API, the console's, the
// journal's, the fluid bridge's; a route added later is walked too) and
// sends each every method it is tried with, with no token, a read
// token, a write token and a revoked one, with the listener's own Host
// and a rebinding one, with no Origin, its own and another site's, and
// with no body, a JSON body and a text/plain one; each answer must be
// what the rules say: the guard's refusal, or passing to the route. Then
// the same without tokens (the quickstart's listener).
func TestEveryRouteGuarded(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	write := func(revoked bool) {
		s := fmt.Sprintf("read viewer %s\nwrite operator %s\n", tokenValue[tokRead], tokenValue[tokWrite])
		if revoked {
			s += "read gone " + tokenValue[tokRevoked] + "\n"
		}
		if err := os.WriteFile(tokens, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(true)
	withTokens, topic := routeDaemon(t, tokens)
	write(false) // revoke it
	time.Sleep(500 * time.Millisecond)
	checkRoutes(t, withTokens, topic, true)
	open, topic := routeDaemon(t, "")
	checkRoutes(t, open, topic, false)
}

func checkRoutes(t *testing.T, d *daemon, topic string, tokens bool) {
	t.Helper()
	routes := d.App.Admin.Routes()
	for _, r := range []string{"GET /healthz", "POST /v1/reload", "POST /v1/pipelines/{name}/{action}", "POST /ui/api/dlq/{p}/replay",
		"GET /ui/api/events", "POST /journal/{topic}/{id}/purge", "DELETE /fluid/topics/{topic}/groups/{group}/schema-version", "/debug/pprof/"} {
		if !slices.Contains(routes, r) {
			t.Fatalf("the routes do not list %q: %q", r, routes)
		}
	}
	own := strings.TrimPrefix(d.Base, "http://")
	_, port, _ := net.SplitHostPort(own)
	// The guard answers at once; a route at work longer than this (a
	// profile, a journal read) has passed it.
	cl := &http.Client{Timeout: 500 * time.Millisecond, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	toks := []string{tokNone}
	if tokens {
		toks = []string{tokNone, tokRead, tokWrite, tokRevoked}
	}
	n, passed := 0, 0
	slow := map[string]time.Duration{}
	for _, pattern := range routes {
		methods, path := routeRequest(t, pattern, topic)
		for _, method := range methods {
			cts := []string{ctNone}
			if method != "GET" && method != "HEAD" {
				cts = []string{ctNone, ctJSON, ctText}
			}
			for _, tok := range toks {
				for _, goodHost := range []bool{true, false} {
					for _, origin := range []string{originNone, originSame, originCross} {
						for _, ct := range cts {
							host := own
							if !goodHost {
								host = "evil.example:" + port
							}
							want := expected(method, path, tok, goodHost, origin, ct, tokens)
							start := time.Now()
							code, errText, err := send(cl, d.Base+path, method, host, tok, origin, ct)
							if took := time.Since(start); took > 500*time.Millisecond {
								slow[method+" "+path] += took
							}
							if method == "HEAD" && want.code != 0 {
								errText = want.err // a HEAD answer has no body
							}
							n++
							what := fmt.Sprintf("%s %s (route %q) with %s, Host %s, %s, %s", method, path, pattern, tok, host, origin, ct)
							switch {
							case want.code != 0 && err != nil:
								t.Errorf("%s: %v, want %d %q", what, err, want.code, want.err)
							case want.code != 0 && (code != want.code || errText != want.err):
								t.Errorf("%s: %d %q, want %d %q", what, code, errText, want.code, want.err)
							case want.code == 0 && err != nil && !errors.Is(err, errTimeout):
								t.Errorf("%s: %v, want it to pass the guard", what, err)
							case want.code == 0 && slices.Contains(guardErrors, errText):
								t.Errorf("%s: %d %q, want it to pass the guard", what, code, errText)
							case want.code == 0:
								passed++
							}
						}
					}
				}
			}
		}
	}
	t.Logf("tokens %v: %d routes, %d requests, %d passed the guard; slow: %v", tokens, len(routes), n, passed, slow)
}

var errTimeout = errors.New("no answer within the client's timeout (the route is at work: it passed the guard)")

// send sends one request as a browser or a client would, and returns the
// status and the JSON error of the answer.
func send(cl *http.Client, url, method, host, tok, origin, ct string) (int, string, error) {
	var body io.Reader
	if ct != ctNone {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	switch origin {
	case originSame:
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	case originCross:
		req.Header.Set("Origin", "http://attacker.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
	}
	switch ct {
	case ctJSON:
		req.Header.Set("Content-Type", "application/json")
	case ctText:
		req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	}
	if v := tokenValue[tok]; v != "" {
		req.Header.Set("Authorization", "Bearer "+v)
	}
	res, err := cl.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, "", errTimeout
		}
		return 0, "", err
	}
	defer func() { _ = res.Body.Close() }()
	if res.Header.Get("Content-Type") == "text/event-stream" {
		return res.StatusCode, "", nil // a stream: its status is the answer
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var e struct{ Error string }
	_ = json.Unmarshal(b, &e)
	return res.StatusCode, e.Error, nil
}
