package opscli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/pipeline"
)

// fakeAdmin is a /v1/ control API that answers as a daemon with one
// pipeline "orders" does, and records what it was asked.
type fakeAdmin struct {
	token string // required as a bearer token when set

	mu     sync.Mutex
	paused bool
	asked  []string // "METHOD PATH"
}

func (f *fakeAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r.Method+" "+r.URL.Path)
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		reply(http.StatusUnauthorized, map[string]string{"error": "unauthorized", "detail": "a bearer token is required"})
		return
	}
	orders := app.PipelineStatus{Status: pipeline.Status{Name: "orders", State: pipeline.StateRunning, Ready: true, Paused: f.paused, Counts: pipeline.Counts{In: 7, Out: 7}}}
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/status":
		reply(http.StatusOK, app.Status{Config: "/etc/streamd.toml", Ready: true, Pipelines: []app.PipelineStatus{orders},
			LastReload: &app.ReloadResult{OK: false, Error: "streamd.toml:4: pipeline.sink.topic: required"}})
	case "GET /v1/pipelines/orders":
		reply(http.StatusOK, orders)
	case "POST /v1/pipelines/orders/pause":
		changed := !f.paused
		f.paused = true
		orders.Paused = true
		reply(http.StatusOK, app.ControlResult{Pipeline: "orders", Action: "pause", Changed: changed, Status: &orders})
	case "POST /v1/reload":
		if f.paused { // a refused reload, as when the new file is invalid
			reply(http.StatusUnprocessableEntity, app.ReloadResult{File: "streamd.toml", Error: "streamd.toml:9: pipeline.batch: must be at least 1, not 0"})
			return
		}
		reply(http.StatusOK, app.ReloadResult{OK: true, File: "streamd.toml", Unchanged: []string{"orders"}, Added: []string{"audit"}, Took: "12ms"})
	default:
		reply(http.StatusNotFound, map[string]string{"error": "no pipeline " + strings.TrimPrefix(r.URL.Path, "/v1/pipelines/")})
	}
}

// TestCtl runs `streamd ctl` against a fake daemon: the request each verb
// makes, what it prints, and its exit code (0 done, 1 refused or failed,
// 2 a usage or set-up error), the token sent from a file.
func TestCtl(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	noAdmin := filepath.Join(dir, "noadmin.toml")
	if err := os.WriteFile(noAdmin, []byte("[kafka]\nbrokers = [\"127.0.0.1:9092\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STREAMD_ADMIN_TOKEN", "")
	t.Setenv("STREAMD_ADMIN_ADDR", "")

	for _, tc := range []struct {
		name       string
		args       []string // after the flags -addr and -token-file that each case gets
		noServer   bool     // the args say all; no -addr, no token
		code       int
		asked      []string // the requests, in order
		stdout     []string // each must appear
		stderr     []string
		notStdout  string
		pausedFrom bool // the pipeline is paused before
	}{
		{name: "status", args: []string{"status"}, asked: []string{"GET /v1/status"},
			stdout: []string{"config /etc/streamd.toml: ready", "REFUSED", "streamd.toml:4: pipeline.sink.topic: required", "PIPELINE", "orders", "running"}},
		{name: "status NAME", args: []string{"status", "orders"}, asked: []string{"GET /v1/pipelines/orders"},
			stdout: []string{"orders", "running"}, notStdout: "config "},
		{name: "status of an unknown pipeline", args: []string{"status", "nope"}, code: 1, asked: []string{"GET /v1/pipelines/nope"},
			stderr: []string{"404 Not Found", "no pipeline nope"}},
		{name: "pause", args: []string{"pause", "orders"}, asked: []string{"POST /v1/pipelines/orders/pause"},
			stdout: []string{"orders paused", "running (paused)"}},
		{name: "pause a paused pipeline", args: []string{"pause", "orders"}, pausedFrom: true, asked: []string{"POST /v1/pipelines/orders/pause"},
			stdout: []string{"orders was already paused"}},
		{name: "reload", args: []string{"reload"}, asked: []string{"POST /v1/reload"},
			stdout: []string{"reloaded streamd.toml in 12ms", "unchanged: orders", "added: audit"}},
		{name: "reload refused", args: []string{"reload"}, pausedFrom: true, code: 1, asked: []string{"POST /v1/reload"},
			stderr: []string{"reload refused; the running config stays", "streamd.toml:9: pipeline.batch"}},
		{name: "json", args: []string{"-json", "status", "orders"}, asked: []string{"GET /v1/pipelines/orders"},
			stdout: []string{`"name":"orders"`}},
		{name: "wrong token", args: []string{"-token-file", empty, "status"}, code: 2, stderr: []string{"token file", "is empty"}},
		{name: "no verb", args: nil, code: 2, stderr: []string{"usage: streamd ctl"}},
		{name: "unknown verb", args: []string{"frobnicate"}, code: 2, stderr: []string{"streamd ctl: frobnicate", "usage:"}},
		{name: "pause without a name", args: []string{"pause"}, code: 2, stderr: []string{"usage:"}},
		{name: "no admin address", noServer: true, args: []string{"-c", noAdmin, "status"}, code: 2, stderr: []string{"has no [admin] listen", "-addr"}},
		{name: "port 0", noServer: true, args: []string{"-addr", "127.0.0.1:0", "status"}, code: 2, stderr: []string{"port 0", "admin server listening"}},
		{name: "daemon down", noServer: true, args: []string{"-addr", "127.0.0.1:1", "status"}, code: 1, stderr: []string{"GET http://127.0.0.1:1/v1/status"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fa := &fakeAdmin{token: "s3cret", paused: tc.pausedFrom}
			args := tc.args
			if !tc.noServer {
				srv := httptest.NewServer(fa)
				t.Cleanup(srv.Close)
				args = append([]string{"-addr", srv.URL, "-token-file", tokenFile}, args...)
				// A later -token-file (the "wrong token" case) wins, as
				// with the flag package.
			}
			var stdout, stderr bytes.Buffer
			code := Ctl(context.Background(), args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, &stdout, &stderr)
			}
			fa.mu.Lock()
			asked := fa.asked
			fa.mu.Unlock()
			if strings.Join(asked, "; ") != strings.Join(tc.asked, "; ") {
				t.Errorf("asked %q, want %q", asked, tc.asked)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout has no %q:\n%s", s, &stdout)
				}
			}
			if tc.notStdout != "" && strings.Contains(stdout.String(), tc.notStdout) {
				t.Errorf("stdout has %q:\n%s", tc.notStdout, &stdout)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr has no %q:\n%s", s, &stderr)
				}
			}
			if strings.Contains(stdout.String()+stderr.String(), "s3cret") {
				t.Error("the token was printed")
			}
		})
	}
}

// TestCtlNeedsToken: without a token, a daemon that requires one answers
// 401 and ctl says so and exits 1; with STREAMD_ADMIN_TOKEN it is sent.
func TestCtlNeedsToken(t *testing.T) {
	fa := &fakeAdmin{token: "s3cret"}
	srv := httptest.NewServer(fa)
	defer srv.Close()
	t.Setenv("STREAMD_ADMIN_TOKEN", "")
	var stdout, stderr bytes.Buffer
	if code := Ctl(context.Background(), []string{"-addr", srv.URL, "status"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "401 Unauthorized") {
		t.Fatalf("no token: exit %d, stderr %q; want 1 and the 401", code, &stderr)
	}
	t.Setenv("STREAMD_ADMIN_TOKEN", " s3cret\n")
	stdout.Reset()
	stderr.Reset()
	if code := Ctl(context.Background(), []string{"-addr", srv.URL, "status"}, &stdout, &stderr); code != 0 {
		t.Fatalf("STREAMD_ADMIN_TOKEN: exit %d, stderr %q", code, &stderr)
	}
}

// TestCtlAddrFromConfig: without -addr, ctl connects where the config's
// [admin] listen says, on loopback when the daemon listens everywhere.
func TestCtlAddrFromConfig(t *testing.T) {
	for _, tc := range []struct{ listen, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"0.0.0.0:8080", "http://127.0.0.1:8080"},
		{":8080", "http://127.0.0.1:8080"},
		{"[::]:8080", "http://127.0.0.1:8080"},
		{"https://admin.example:8443/", "https://admin.example:8443"},
	} {
		dir := t.TempDir()
		file := filepath.Join(dir, "streamd.toml")
		if err := os.WriteFile(file, []byte("[admin]\nlisten = \""+tc.listen+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, base, err := ctlClient(file, "", "", "", "")
		if err != nil || base != tc.want {
			t.Errorf("listen %q: base %q, err %v; want %q", tc.listen, base, err, tc.want)
		}
	}
}
