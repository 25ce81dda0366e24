package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/daemon/defaults"
)

func TestAdminConfig(t *testing.T) {
	c := mustParse(t, pipe("", "", "", "[admin]\nlisten = \"127.0.0.1:9644\""))
	a := c.Admin
	if !a.ProbesOpen || a.ReadHeaderTimeout.Duration != defaults.AdminReadHeaderTimeout || a.ReadTimeout.Duration != defaults.AdminReadTimeout ||
		a.WriteTimeout.Duration != defaults.AdminWriteTimeout || a.IdleTimeout.Duration != defaults.AdminIdleTimeout ||
		a.MaxHeaderBytes != defaults.AdminMaxHeaderBytes || a.MaxBodyBytes != defaults.AdminMaxBodyBytes {
		t.Errorf("defaults: %+v", a)
	}
	c = mustParse(t, pipe("", "", "", "[admin]\nlisten = \"0.0.0.0:9644\"\nprobes_open = false\n[admin.auth]\ntokens_file = \"tokens\"\n[admin.tls]\ncert_file = \"c.pem\"\nkey_file = \"k.pem\""))
	if c.Admin.ProbesOpen || c.Admin.Auth.TokensFile != "tokens" || c.Admin.TLS.CertFile != "c.pem" {
		t.Errorf("explicit: %+v %+v %+v", c.Admin, c.Admin.Auth, c.Admin.TLS)
	}
	for _, ok := range []string{
		"[admin]\nlisten = \"localhost:9644\"",
		"[admin]\nlisten = \"[::1]:9644\"",
		"[admin]\nlisten = \"0.0.0.0:9644\"\nallow_unauthenticated = true",
		"[admin]\nlisten = \"0.0.0.0:9644\"\n[admin.tls]\ncert_file = \"c\"\nkey_file = \"k\"\nclient_ca_file = \"ca\"",
		"[admin]\nlisten = \"myhost:9644\"", // a name: checked once bound
	} {
		mustParse(t, pipe("", "", "", ok))
	}
}

func TestAdminConfigRefused(t *testing.T) {
	exposed := `"0.0.0.0:9644" is not a loopback address, and no auth is configured`
	for _, tc := range []struct {
		name, tail, at, want string
	}{
		{"all interfaces", "[admin]\nlisten = \"0.0.0.0:9644\"", "listen", "admin.listen: " + exposed},
		{"empty host", "[admin]\nlisten = \":9644\"", "listen", `admin.listen: ":9644" is not a loopback address`},
		{"a public address", "[admin]\nlisten = \"10.1.2.3:9644\"", "listen", `admin.listen: "10.1.2.3:9644" is not a loopback address`},
		{"TLS without a client CA is not auth", "[admin]\nlisten = \"0.0.0.0:9644\"\n[admin.tls]\ncert_file = \"c\"\nkey_file = \"k\"", "listen", "admin.listen: " + exposed},
		{"no port", "[admin]\nlisten = \"127.0.0.1\"", "listen", `admin.listen: "127.0.0.1": want HOST:PORT`},
		{"tls without a key", "[admin]\nlisten = \"127.0.0.1:1\"\n[admin.tls]\ncert_file = \"c\"", "[admin.tls]", "admin.tls: set cert_file and key_file"},
		{"tls version", "[admin]\nlisten = \"127.0.0.1:1\"\n[admin.tls]\ncert_file = \"c\"\nkey_file = \"k\"\nmin_version = \"1.0\"", "min_version", `admin.tls.min_version: must be "1.2" or "1.3", not "1.0"`},
		{"auth without a file", "[admin]\nlisten = \"127.0.0.1:1\"\n[admin.auth]", "[admin.auth]", "admin.auth.tokens_file: required with [admin.auth]"},
		{"auth without a listener", "[admin.auth]\ntokens_file = \"t\"", "[admin.auth]", "admin.auth: applies to the admin server, which is off"},
		{"header timeout", "[admin]\nlisten = \"127.0.0.1:1\"\nread_header_timeout = \"0s\"", "read_header_timeout", `admin.read_header_timeout: "0s" is out of range (allowed: "100ms" to "10m")`},
		{"body bytes", "[admin]\nlisten = \"127.0.0.1:1\"\nmax_body_bytes = 10", "max_body_bytes", "admin.max_body_bytes: 10 is out of range (allowed: 1024 to 1073741824)"},
	} {
		src := pipe("", "", "", tc.tail)
		_, err := Parse("c.toml", []byte(src), env(nil))
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		got := colRE.ReplaceAllString(err.Error(), "$1: ")
		want := "c.toml:" + strconv.Itoa(lineOf(t, src, tc.at)) + ": " + tc.want
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s:\n got %s\nwant %s...", tc.name, got, want)
		}
	}
	_, err := Parse("c.toml", []byte(pipe("", "", "", "[admin]\nlisten = \"0.0.0.0:9644\"")), env(nil))
	for _, how := range []string{"tokens_file", "client_ca_file", "allow_unauthenticated = true", "127.0.0.1"} {
		if err == nil || !strings.Contains(err.Error(), how) {
			t.Errorf("the refusal does not say %q: %v", how, err)
		}
	}
}

// TestAdminStreamsAndHosts: the limits of long-lived responses default
// and are checked; hosts are names, not URLs.
func TestAdminStreamsAndHosts(t *testing.T) {
	admin := func(keys string) string {
		return pipe("", "", "", "[admin]\nlisten = \"127.0.0.1:9644\"\n"+keys)
	}
	cfg := mustParse(t, admin(`hosts = ["admin.example.com", "ops.example.com:8443"]`))
	if cfg.Admin.MaxStreams != 64 || cfg.Admin.MaxStreamsPerToken != 16 {
		t.Errorf("defaults: max_streams %d, per token %d", cfg.Admin.MaxStreams, cfg.Admin.MaxStreamsPerToken)
	}
	if cfg = mustParse(t, admin("max_streams = 4")); cfg.Admin.MaxStreamsPerToken != 4 {
		t.Errorf("max_streams 4: per token %d; want 4 (at most the whole)", cfg.Admin.MaxStreamsPerToken)
	}
	for _, tc := range []struct{ src, want string }{
		{"max_streams = 0", "admin.max_streams: 0 is out of range"},
		{"max_streams = 4\nmax_streams_per_token = 5", "above admin.max_streams"},
		{`hosts = ["http://admin.example.com"]`, `admin.hosts[0]: "http://admin.example.com": want a host name`},
		{`hosts = ["a.example.com/x"]`, "admin.hosts[0]"},
	} {
		_, err := Parse("c.toml", []byte(admin(tc.src)), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.src, err, tc.want)
		}
	}
}
