package config

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/streamd/streamd/internal/daemon/defaults"
)

// AdminTLS serves the admin API over HTTPS.
type AdminTLS struct {
	// CertFile and KeyFile are the server's PEM certificate and key (read
	// again when they change).
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// ClientCAFile, when set, makes every client present a certificate
	// signed by one of its PEM CAs (mutual TLS).
	ClientCAFile string `toml:"client_ca_file"`
	// MinVersion is "1.2" (default) or "1.3".
	MinVersion string `toml:"min_version"`
}

// AdminAuth requires bearer tokens on the admin API.
type AdminAuth struct {
	// TokensFile has one token a line: ROLE NAME TOKEN, ROLE read or
	// write (admin.Tokens); read again when it changes.
	TokensFile string `toml:"tokens_file"`
}

var (
	rangeHeaderTimeout = durRange{lo: 100 * time.Millisecond, hi: 10 * time.Minute}
	rangeHTTPTimeout   = durRange{lo: time.Second, hi: 24 * time.Hour}
	rangeHeaderBytes   = intRange{lo: 1 << 10, hi: 16 << 20}
	rangeBodyBytes     = intRange{lo: 1 << 10, hi: 1 << 30}
	rangeStreams       = intRange{lo: 1, hi: 100_000}
)

func (c *Config) adminDefaults() {
	a := &c.Admin
	setDefault(c, "admin.probes_open", &a.ProbesOpen, true)
	setDefault(c, "admin.read_header_timeout", &a.ReadHeaderTimeout.Duration, defaults.AdminReadHeaderTimeout)
	setDefault(c, "admin.read_timeout", &a.ReadTimeout.Duration, defaults.AdminReadTimeout)
	setDefault(c, "admin.write_timeout", &a.WriteTimeout.Duration, defaults.AdminWriteTimeout)
	setDefault(c, "admin.idle_timeout", &a.IdleTimeout.Duration, defaults.AdminIdleTimeout)
	setDefault(c, "admin.max_header_bytes", &a.MaxHeaderBytes, defaults.AdminMaxHeaderBytes)
	setDefault(c, "admin.max_body_bytes", &a.MaxBodyBytes, defaults.AdminMaxBodyBytes)
	setDefault(c, "admin.max_streams", &a.MaxStreams, defaults.AdminMaxStreams)
	setDefault(c, "admin.max_streams_per_token", &a.MaxStreamsPerToken, min(defaults.AdminMaxStreamsPerToken, a.MaxStreams))
	if t := a.TLS; t != nil {
		t.CertFile, t.KeyFile, t.ClientCAFile = c.Resolve(t.CertFile), c.Resolve(t.KeyFile), c.Resolve(t.ClientCAFile)
	}
	if a.Auth != nil {
		a.Auth.TokensFile = c.Resolve(a.Auth.TokensFile)
	}
}

func (c *Config) validateAdmin(k *checker) {
	a := &c.Admin
	k.dur("admin.read_header_timeout", a.ReadHeaderTimeout.Duration, rangeHeaderTimeout)
	k.dur("admin.read_timeout", a.ReadTimeout.Duration, rangeHTTPTimeout)
	k.dur("admin.write_timeout", a.WriteTimeout.Duration, rangeHTTPTimeout)
	k.dur("admin.idle_timeout", a.IdleTimeout.Duration, rangeHTTPTimeout)
	k.int("admin.max_header_bytes", int64(a.MaxHeaderBytes), rangeHeaderBytes)
	k.int("admin.max_body_bytes", a.MaxBodyBytes, rangeBodyBytes)
	k.int("admin.max_streams", int64(a.MaxStreams), rangeStreams)
	k.int("admin.max_streams_per_token", int64(a.MaxStreamsPerToken), rangeStreams)
	if a.MaxStreamsPerToken > a.MaxStreams {
		k.bad("admin.max_streams_per_token", "%d is above admin.max_streams (%d): a token's share is at most the whole", a.MaxStreamsPerToken, a.MaxStreams)
	}
	for i, h := range a.Hosts {
		name, _, err := net.SplitHostPort(h)
		if err != nil {
			name = h
		}
		if name == "" || strings.ContainsAny(h, "/ @?#*") || strings.Contains(h, "://") {
			k.bad(fmt.Sprintf("admin.hosts[%d]", i), "%q: want a host name or address, optionally with :PORT (e.g. \"admin.example.com\"), not a URL", h)
		}
	}
	if t := a.TLS; t != nil {
		if t.CertFile == "" || t.KeyFile == "" {
			k.bad("admin.tls", "set cert_file and key_file (the server's certificate and key)")
		}
		if !oneOf(t.MinVersion, "", "1.2", "1.3") {
			k.bad("admin.tls.min_version", "must be \"1.2\" or \"1.3\", not %q", t.MinVersion)
		}
	}
	if a.Auth != nil && a.Auth.TokensFile == "" {
		k.bad("admin.auth.tokens_file", "required with [admin.auth] (a file of lines ROLE NAME TOKEN)")
	}
	if a.Listen == "" {
		for _, key := range []string{"tls", "auth", "allow_unauthenticated"} {
			if c.isSet("admin." + key) {
				k.bad("admin."+key, "applies to the admin server, which is off: set admin.listen")
			}
		}
		return
	}
	host, _, err := net.SplitHostPort(a.Listen)
	if err != nil {
		k.bad("admin.listen", "%q: want HOST:PORT, e.g. \"127.0.0.1:9644\"", a.Listen)
		return
	}
	secured := a.Auth != nil || a.TLS != nil && a.TLS.ClientCAFile != ""
	if exposed(host) && !secured && !a.AllowUnauthenticated {
		k.bad("admin.listen", "%q is not a loopback address, and no auth is configured: anyone who can reach it could append, "+
			"delete and purge journals and move fluid consumer groups (allowed: a loopback address such as \"127.0.0.1:9644\"; or "+
			"[admin.auth] tokens_file = \"/path/to/tokens\" with lines \"ROLE NAME TOKEN\", ROLE read or write; or [admin.tls] "+
			"client_ca_file for mutual TLS; or allow_unauthenticated = true to serve it without auth anyway)", a.Listen)
	}
}

// exposed reports whether a listen host is reachable from other hosts as
// far as the config can tell: every address but loopback ones and
// "localhost". Other host names are checked by the server once bound.
func exposed(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	if host == "" || ip == nil {
		return host == "" // "" is every interface; a name is checked at start
	}
	return !ip.IsLoopback()
}
