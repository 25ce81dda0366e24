package opscli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/x/tlsconf"
)

const ctlUsage = `usage: streamd ctl [flags] <command>

commands (over the admin API's /v1/ of a running daemon):
  status [NAME]      the pipelines: state, readiness, pause, partitions and
                     group generation; the last reload and its error
  pause NAME         stop fetching; in-flight records finish and commit; the
                     consumer group membership and assignment are kept
  resume NAME        fetch again from where it paused
  restart NAME       drain the pipeline and start it again from the config
  reload             read the config file again and apply it as a diff
                     (exit 1 when the new config is refused: nothing changed)

flags:
`

// Ctl is `streamd ctl`: a client of the /v1/ control API.
func Ctl(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("streamd ctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, ctlUsage)
		fs.PrintDefaults()
	}
	file := fs.String("c", "config.toml", "config file of the daemon: its [admin] listen and tls say where to connect")
	addr := fs.String("addr", os.Getenv("STREAMD_ADMIN_ADDR"), "admin address (host:port or URL) instead of the config's [admin] listen (env STREAMD_ADMIN_ADDR)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (a token of role write for pause, resume, restart, reload); default: env STREAMD_ADMIN_TOKEN")
	ca := fs.String("ca", "", "PEM CA bundle that signs the admin server's certificate (default: the config's [admin.tls] cert_file, then the system roots)")
	cert := fs.String("cert", "", "client certificate (PEM) for an admin server that requires mutual TLS")
	key := fs.String("key", "", "client key (PEM) for -cert")
	asJSON := fs.Bool("json", false, "print the server's JSON answer")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long (a reload or restart drains pipelines: up to their shutdown_timeout)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	verb, rest := rest[0], rest[1:]
	var method, path string
	switch {
	case verb == "status" && len(rest) == 0:
		method, path = "GET", "/v1/status"
	case verb == "status" && len(rest) == 1:
		method, path = "GET", "/v1/pipelines/"+url.PathEscape(rest[0])
	case verb == "reload" && len(rest) == 0:
		method, path = "POST", "/v1/reload"
	case slices.Contains([]string{"pause", "resume", "restart"}, verb) && len(rest) == 1:
		method, path = "POST", "/v1/pipelines/"+url.PathEscape(rest[0])+"/"+verb
	default:
		fmt.Fprintf(stderr, "streamd ctl: %s\n", strings.TrimSpace(verb+" "+strings.Join(rest, " ")))
		fs.Usage()
		return 2
	}
	cl, base, err := ctlClient(*file, *addr, *ca, *cert, *key)
	if err != nil {
		fmt.Fprintf(stderr, "streamd ctl: %v\n", err)
		return 2
	}
	token, err := ctlToken(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "streamd ctl: %v\n", err)
		return 2
	}
	rctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, base+path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "streamd ctl: %v\n", err)
		return 2
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cl.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "streamd ctl: %s %s: %v\n", method, base+path, err)
		return 1
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		fmt.Fprintf(stderr, "streamd ctl: reading the answer: %v\n", err)
		return 1
	}
	if *asJSON {
		_, _ = stdout.Write(body)
		if resp.StatusCode != http.StatusOK {
			return 1
		}
		return 0
	}
	return printCtl(verb, resp.StatusCode, body, stdout, stderr)
}

// ctlClient returns an HTTP client and the base URL of the daemon's admin
// server: --addr, or the [admin] section of the config file (read
// leniently: a file the daemon would refuse, being edited, still names its
// admin address).
func ctlClient(file, addr, ca, cert, key string) (*http.Client, string, error) {
	var adm struct {
		Admin struct {
			Listen string `toml:"listen"`
			TLS    *struct {
				CertFile string `toml:"cert_file"`
			} `toml:"tls"`
		} `toml:"admin"`
	}
	var fileErr error
	if addr == "" {
		if _, err := toml.DecodeFile(file, &adm); err != nil {
			fileErr = err
		}
		addr = adm.Admin.Listen
	}
	if addr == "" {
		if fileErr != nil {
			return nil, "", fmt.Errorf("no admin address: %s does not say ([admin] listen): %v; give -addr", file, fileErr)
		}
		return nil, "", fmt.Errorf("%s has no [admin] listen: the daemon serves no control API; set it, or give -addr", file)
	}
	serverCert := ""
	if adm.Admin.TLS != nil {
		serverCert = resolveNear(file, adm.Admin.TLS.CertFile)
	}
	return adminEndpoint(addr, adm.Admin.TLS != nil, serverCert, tlsconf.Files{CAFile: ca, CertFile: cert, KeyFile: key})
}

// adminEndpoint returns an HTTP client and the base URL of a daemon's
// admin API at addr: a URL, or the host:port of [admin] listen (a
// wildcard host answers on loopback here; https when tlsOn). For https,
// the CA is f.CAFile, else the server's own certificate serverCert (a
// self-signed one is its own CA), else the system roots; f's certificate
// and key are the client's for mutual TLS. Every command that calls the
// admin API (ctl, dlq replay, tap) gets its client here.
func adminEndpoint(addr string, tlsOn bool, serverCert string, f tlsconf.Files) (*http.Client, string, error) {
	tlsOn = tlsOn || strings.HasPrefix(addr, "https://")
	base := addr
	if !strings.Contains(base, "://") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, "", fmt.Errorf("admin address %q: %v", addr, err)
		}
		if port == "0" {
			return nil, "", fmt.Errorf("admin address %q has port 0 (any free port): the daemon logs the one it took (\"admin server listening\"); give it with -addr", addr)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1" // listening everywhere: this host answers on loopback
		}
		scheme := "http"
		if tlsOn {
			scheme = "https"
		}
		base = scheme + "://" + net.JoinHostPort(host, port)
	}
	base = strings.TrimRight(base, "/")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsOn {
		if f.CAFile == "" {
			f.CAFile = serverCert
		}
		tc, err := tlsconf.Client(f)
		if err != nil {
			return nil, "", fmt.Errorf("admin TLS: %w", err)
		}
		tr.TLSClientConfig = tc
	}
	return &http.Client{Transport: tr}, base, nil
}

// resolveNear resolves p against the folder of the config file, as the
// daemon does.
func resolveNear(file, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(file), p)
}

func ctlToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv("STREAMD_ADMIN_TOKEN")), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("token file %s is empty", file)
	}
	return t, nil
}

// printCtl prints the answer for people; it returns the exit code.
func printCtl(verb string, code int, body []byte, stdout, stderr io.Writer) int {
	var e struct {
		Error  string `json:"error"`
		Detail string `json:"detail"`
	}
	switch verb {
	case "reload":
		var r app.ReloadResult
		if err := json.Unmarshal(body, &r); err != nil || (code != http.StatusOK && r.Error == "" && json.Unmarshal(body, &e) == nil) {
			return ctlFailed(code, body, e.Error, e.Detail, stderr)
		}
		if code == http.StatusServiceUnavailable { // busy, or shutting down: not a verdict on the file
			return ctlFailed(code, body, r.Error, "", stderr)
		}
		if !r.OK {
			fmt.Fprintf(stderr, "reload refused; the running config stays:\n%s\n", r.Error)
			return 1
		}
		fmt.Fprintf(stdout, "reloaded %s in %s\n", r.File, r.Took)
		for _, l := range []struct {
			what  string
			names []string
		}{{"unchanged", r.Unchanged}, {"changed (drained and restarted)", r.Changed}, {"added", r.Added}, {"removed", r.Removed},
			{"built again (had failed to load)", r.Retried},
			{"paused", r.Paused}, {"resumed", r.Resumed}, {"NOT applied, need a restart", r.RestartOnly}, {"warnings", r.Warnings}} {
			if len(l.names) > 0 {
				fmt.Fprintf(stdout, "  %s: %s\n", l.what, strings.Join(l.names, ", "))
			}
		}
		return 0
	case "status":
		if code != http.StatusOK {
			_ = json.Unmarshal(body, &e)
			return ctlFailed(code, body, e.Error, e.Detail, stderr)
		}
		var st app.Status
		if err := json.Unmarshal(body, &st); err != nil || st.Pipelines == nil {
			var ps app.PipelineStatus // status NAME
			if err := json.Unmarshal(body, &ps); err != nil {
				return ctlFailed(code, body, "unreadable answer", err.Error(), stderr)
			}
			st.Pipelines = []app.PipelineStatus{ps}
		} else {
			ready := "ready"
			if !st.Ready {
				ready = "NOT ready"
			}
			fmt.Fprintf(stdout, "config %s: %s\n", st.Config, ready)
			if r := st.LastReload; r != nil {
				if r.OK {
					fmt.Fprintf(stdout, "last reload %s: applied in %s\n", r.At.Format(time.RFC3339), r.Took)
				} else {
					fmt.Fprintf(stdout, "last reload %s: REFUSED (the config before it runs):\n  %s\n", r.At.Format(time.RFC3339),
						strings.ReplaceAll(r.Error, "\n", "\n  "))
				}
			}
		}
		printPipelines(stdout, st.Pipelines)
		return 0
	default:
		var r app.ControlResult
		if code != http.StatusOK || json.Unmarshal(body, &r) != nil {
			_ = json.Unmarshal(body, &e)
			return ctlFailed(code, body, e.Error, e.Detail, stderr)
		}
		what := map[string]string{"pause": "paused", "resume": "resumed", "restart": "restarted"}[verb]
		if r.Changed {
			fmt.Fprintf(stdout, "%s %s\n", r.Pipeline, what)
		} else {
			fmt.Fprintf(stdout, "%s was already %s\n", r.Pipeline, what)
		}
		if r.Status != nil {
			printPipelines(stdout, []app.PipelineStatus{*r.Status})
		}
		return 0
	}
}

func ctlFailed(code int, body []byte, msg, detail string, stderr io.Writer) int {
	if msg == "" {
		msg = string(bytes.TrimSpace(body))
	}
	if detail != "" {
		msg += ": " + detail
	}
	fmt.Fprintf(stderr, "streamd ctl: %d %s: %s\n", code, http.StatusText(code), msg)
	return 1
}

func printPipelines(w io.Writer, ps []app.PipelineStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tSTATE\tREADY\tIN FLIGHT\tIN\tOUT\tGENERATION\tPARTITIONS\tREASON")
	for _, p := range ps {
		state := string(p.State)
		if p.Paused {
			state += " (paused)"
		}
		gen, parts := "-", "-"
		if g := p.Group; g != nil {
			gen = strconv.Itoa(int(g.Generation))
			var tps []string
			for _, t := range slices.Sorted(maps.Keys(g.Assigned)) {
				var ns []string
				for _, n := range g.Assigned[t] {
					ns = append(ns, strconv.Itoa(int(n)))
				}
				tps = append(tps, t+":"+strings.Join(ns, ","))
			}
			if len(tps) > 0 {
				parts = strings.Join(tps, " ")
			} else {
				parts = "none"
			}
		}
		ready := "yes"
		if !p.Ready {
			ready = "no"
		}
		reason := p.Reason
		if reason == "" {
			reason = p.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Name, state, ready, p.InFlight, p.In, p.Out, gen, parts, reason)
	}
	_ = tw.Flush()
}
