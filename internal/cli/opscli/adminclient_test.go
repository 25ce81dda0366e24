package opscli

import (
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/daemon/config"
)

// TestAdminClientAddress: the commands that call a running daemon (dlq
// replay, tap) find it as streamd ctl does (adminEndpoint): a wildcard
// listen is reached on loopback, [admin.tls] means https, a URL is taken
// as it is, and a listen with port 0 is refused with what to do.
func TestAdminClientAddress(t *testing.T) {
	for _, c := range []struct {
		listen, addr string
		tls          bool
		base, err    string
	}{
		{listen: "0.0.0.0:8080", base: "http://127.0.0.1:8080"},
		{listen: "[::]:8080", base: "http://127.0.0.1:8080"},
		{listen: "10.0.0.1:8443", base: "http://10.0.0.1:8443"},
		{listen: "127.0.0.1:8080", addr: "http://127.0.0.2:9000/", base: "http://127.0.0.2:9000"},
		{listen: "127.0.0.1:8080", addr: "127.0.0.3:9000", base: "http://127.0.0.3:9000"},
		{listen: "127.0.0.1:0", err: "port 0"},
		{listen: "", err: "[admin] listen is not set"},
		{listen: "nonsense", err: "admin address \"nonsense\""},
	} {
		cfg := &config.Config{File: "streamd.toml", Admin: config.Admin{Listen: c.listen}}
		cl, err := newAdminClient(cfg, c.addr, "", "")
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("listen %q addr %q: error %v, want one containing %q", c.listen, c.addr, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("listen %q addr %q: %v", c.listen, c.addr, err)
		case c.err == "" && cl.base != c.base:
			t.Errorf("listen %q addr %q: base %q, want %q", c.listen, c.addr, cl.base, c.base)
		}
	}
}
