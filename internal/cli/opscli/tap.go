package opscli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/streamd/streamd/internal/cli/termsafe"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/console"
)

const tapUsage = `usage: streamd tap -c config.toml PIPELINE [STAGE] [flags]

Prints a sample of the records going into and out of the pipeline's stages
(or one STAGE) in the running daemon, one line a record:
  STAGE TOPIC/PARTITION@OFFSET key=KEY: INPUT  ->  OUTPUT
OUTPUT is each record the stage returned for it (" | " between them),
"(dropped)" when it returned none, or "REJECTED: error". Nothing is sampled
while no tap is open; the daemon bounds the rate and cuts values
([console] tap_max_rate, tap_max_value_bytes, tap_max_open).

flags:
  --rate N          records per second (default: 10, or the daemon's maximum if lower)
  --bytes N         cut keys, values and headers at N bytes (default: the daemon's maximum)
  --count N         stop after N records (default: until interrupted)
  --json            one JSON object a record (console.TapEvent)
  --raw             print keys, values and errors as they are; without it their
                    control characters are shown escaped (\x1b), so that a record
                    cannot act on the terminal
  --admin URL, --token-file FILE (or $STREAMD_ADMIN_TOKEN), --ca-file FILE: see streamd dlq -h
`

// Tap is `streamd tap ARGS`: it returns the exit code.
func Tap(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stderr, tapUsage)
		return 2
	}
	fs := flag.NewFlagSet("streamd tap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tapUsage) }
	cfgPath := fs.String("c", "", "config file")
	rate := fs.Float64("rate", 0, "records per second")
	bytes := fs.Int("bytes", 0, "cut values at this many bytes")
	count := fs.Int("count", 0, "stop after this many records")
	asJSON := fs.Bool("json", false, "JSON lines")
	raw := fs.Bool("raw", false, "print record bytes as they are")
	var addr, tokenFile, caFile string
	adminFlags(fs, &addr, &tokenFile, &caFile)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "streamd tap: %s\n", fmt.Sprintf(format, a...))
		return 2
	}
	if *cfgPath == "" {
		return usage("-c config.toml is required")
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usage("want PIPELINE [STAGE], got %q", pos)
	}
	if *rate < 0 || *bytes < 0 || *count < 0 {
		return usage("--rate, --bytes and --count are not negative")
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "streamd tap: invalid config:\n%v\n", err)
		return 2
	}
	c, err := newAdminClient(cfg, addr, tokenFile, caFile)
	if err != nil {
		fmt.Fprintf(stderr, "streamd tap: %v\n", err)
		return 1
	}
	path := "/ui/api/tap/" + pathEscape(pos[0])
	if len(pos) == 2 {
		path += "/" + pathEscape(pos[1])
	}
	q := url.Values{}
	if *rate > 0 {
		q.Set("rate", strconv.FormatFloat(*rate, 'g', -1, 64))
	}
	if *bytes > 0 {
		q.Set("bytes", strconv.Itoa(*bytes))
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	out := stdout
	if *asJSON && !*raw {
		tw := termsafe.NewWriter(stdout)
		defer func() { _ = tw.Flush() }()
		out = tw
	}
	n := 0
	err = c.stream(ctx, path, func(event string, data []byte) error {
		switch event {
		case "status":
			var st struct {
				Rate  float64 `json:"rate"`
				Bytes int     `json:"bytes"`
			}
			if json.Unmarshal(data, &st) == nil && n == 0 {
				fmt.Fprintf(stderr, "tap open on %s: at most %v records/s, values cut at %d bytes\n", strings.Join(pos, " stage "), st.Rate, st.Bytes)
			}
			return nil
		case "record":
		default:
			return nil
		}
		if *asJSON {
			_, _ = out.Write(append(data, '\n'))
		} else {
			var ev console.TapEvent
			if err := json.Unmarshal(data, &ev); err != nil {
				return err
			}
			fmt.Fprintln(out, tapLine(&ev, *raw))
		}
		n++
		if *count > 0 && n >= *count {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) || err == nil || ctx.Err() != nil {
		return 0
	}
	fmt.Fprintf(stderr, "streamd tap: %v\n", err)
	return 1
}

var errStop = errors.New("stop")

// tapLine is one sampled record: STAGE TOPIC/P@O key=KEY: IN  ->  OUT,
// each field of the record on the line with its control characters
// escaped (termsafe.String) unless raw (then only its line breaks are).
func tapLine(ev *console.TapEvent, raw bool) string {
	text := termsafe.String
	if raw {
		text = strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace
	}
	var out string
	switch {
	case ev.CallErr != "":
		out = "CALL FAILED: " + text(ev.CallErr)
	case ev.Err != "":
		out = "REJECTED: " + text(ev.Err)
	case len(ev.Out) == 0:
		out = "(dropped)"
	default:
		parts := make([]string, len(ev.Out))
		for i := range ev.Out {
			parts[i] = text(ev.Out[i].Value.String())
		}
		out = strings.Join(parts, " | ")
	}
	return fmt.Sprintf("%s %s/%d@%d key=%s: %s  ->  %s", text(ev.Stage), text(ev.In.Topic), ev.In.Partition, ev.In.Offset,
		text(ev.In.Key.String()), text(ev.In.Value.String()), out)
}

// stream reads the server-sent events of GET path, calling fn for each;
// an error from fn ends it.
func (c *adminClient) stream(ctx context.Context, path string, fn func(event string, data []byte) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	res, err := c.send(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return answerError(http.MethodGet, path, res.Status, b)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var event string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				if err := fn(event, data); err != nil {
					return err
				}
			}
			event, data = "", nil
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: ")...)
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	if ctx.Err() == nil {
		return errors.New("the daemon ended the tap (it is shutting down)")
	}
	return nil
}
