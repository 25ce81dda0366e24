package opscli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/console"
	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/internal/x/tlsconf"
)

// adminFlags adds the flags of a command that talks to a running
// daemon's admin API.
func adminFlags(fs *flag.FlagSet, addr, tokenFile, caFile *string) {
	fs.StringVar(addr, "admin", "", "the daemon's admin URL (default: from [admin] listen, https with [admin.tls])")
	fs.StringVar(tokenFile, "token-file", "", "file holding a bearer token for the admin API (default: $STREAMD_ADMIN_TOKEN)")
	fs.StringVar(caFile, "ca-file", "", "PEM CAs to trust for an https admin URL (default: the system roots and [admin.tls] cert_file)")
}

// adminClient calls a daemon's admin API.
type adminClient struct {
	base  string
	token string
	hc    *http.Client
}

func newAdminClient(cfg *config.Config, addr, tokenFile, caFile string) (*adminClient, error) {
	token, err := ctlToken(tokenFile)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		if cfg.Admin.Listen == "" {
			return nil, fmt.Errorf("%s: [admin] listen is not set: the daemon has no admin API to reach (or give --admin URL)", cfg.File)
		}
		addr = cfg.Admin.Listen
	}
	serverCert := ""
	if cfg.Admin.TLS != nil {
		serverCert = cfg.Admin.TLS.CertFile // resolved by config.Load
	}
	hc, base, err := adminEndpoint(addr, cfg.Admin.TLS != nil, serverCert, tlsconf.Files{CAFile: caFile})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	return &adminClient{base: base, token: token, hc: hc}, nil
}

// do sends a request and decodes a JSON answer into out; an error answer
// becomes an error naming what the daemon said.
func (c *adminClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.send(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if res.StatusCode >= 300 {
		return answerError(method, path, res.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// send sends req with the client's token.
func (c *adminClient) send(req *http.Request) (*http.Response, error) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin API %s: %w", c.base, err)
	}
	return res, nil
}

// answerError is the error of an error answer with body b: the daemon's
// {"error", "detail"}, or the body itself when it is not one.
func answerError(method, path, status string, b []byte) error {
	var e struct{ Error, Detail string }
	_ = json.Unmarshal(b, &e)
	msg := strings.TrimSpace(e.Error + ": " + e.Detail)
	if e.Error == "" {
		msg = strings.TrimSpace(string(b))
	}
	msg = strings.TrimSuffix(msg, ":")
	return fmt.Errorf("%s %s: %s: %s", method, path, status, msg)
}

// replayThroughDaemon asks the running daemon to replay through the
// pipeline and prints its progress until it ends.
func replayThroughDaemon(ctx context.Context, cfg *config.Config, name string, f dlq.Filter, fl dlqFlags, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "streamd dlq replay: %v\n", err)
		return 1
	}
	if fl.dryRun {
		return usageErr(stderr, "--dry-run goes with --to source (it reads the topic itself)")
	}
	c, err := newAdminClient(cfg, fl.admin, fl.tokenFile, fl.caFile)
	if err != nil {
		return fail(err)
	}
	var job console.ReplayJob
	req := console.ReplayRequest{Filter: f, To: "pipeline", Batch: fl.batch, MaxRecords: fl.maxRecords, Force: fl.force}
	if err := c.do(ctx, http.MethodPost, "/ui/api/dlq/"+pathEscape(name)+"/replay", req, &job); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stderr, "replay %s started in the daemon (%s)\n", job.ID, c.base)
	show := progressPrinter(stderr)
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "streamd dlq replay: interrupted; replay %s goes on in the daemon (GET %s/ui/api/replays/%s)\n", job.ID, c.base, job.ID)
			return 1
		case <-time.After(500 * time.Millisecond):
		}
		if err := c.do(ctx, http.MethodGet, "/ui/api/replays/"+job.ID, nil, &job); err != nil {
			if ctx.Err() != nil {
				continue
			}
			return fail(err)
		}
		show(job.Progress)
		if job.Done {
			break
		}
	}
	printProgress(stdout, job.Progress, "replayed through pipeline "+name)
	fmt.Fprintf(stdout, "%d of them rejected again by the pipeline (its error policy applied)\n", job.Rejected)
	if job.Err != "" || job.Rejected > 0 {
		return 1
	}
	return 0
}

func usageErr(w io.Writer, msg string) int {
	fmt.Fprintf(w, "streamd dlq replay: %s\n", msg)
	return 2
}

func pathEscape(s string) string {
	return strings.NewReplacer("%", "%25", "/", "%2F", "?", "%3F", "#", "%23", " ", "%20").Replace(s)
}
