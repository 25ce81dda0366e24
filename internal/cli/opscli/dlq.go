package opscli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/cli/termsafe"
	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/internal/daemon/recview"
)

const dlqUsage = `usage: streamd dlq <command> -c config.toml PIPELINE [flags]

commands:
  ls                       list the dead letters: PARTITION@OFFSET, time, stage, source, error
  show PARTITION@OFFSET    one dead letter: why, where from, headers, key and value
  replay                   send the original records of the selected dead letters again,
                           at-least-once, with progress; the dead-letter topic is not changed
      --to source          back to the topic and partition each was read from (default),
                           where the running pipeline reads them again
      --to pipeline        through the pipeline's stages and sink in the running daemon
                           (its admin API: --admin, --token-file or STREAMD_ADMIN_TOKEN);
                           exit 1 if the pipeline rejects any of them again
      --topic T            with --to source: to topic T instead, partitioned by key
      --dry-run            count what would be replayed, send nothing
      --max-records N      replay at most N of the selected dead letters (then say where to
                           resume); --to pipeline: at most the daemon's [console]
                           replay_max_records (default 100000)
      --force              a replayed record the pipeline rejects again is dead-lettered
                           again; without it, it is not (its dead letter is still there)

A replayed record carries streamd-replay-of (the dead letter) and
streamd-replay-count (how many times it was replayed). One replay of a
pipeline runs at a time in the daemon (--to pipeline).

selection (ls, replay):
  --partition N            one partition of the dead-letter topic (default all)
  --offsets A-B            dead-letter offsets A to B, both included ("A-" or "-B" leave an end open)
  --stage NAME             rejected by this stage ("sink" for the sink)
  --error TEXT             whose error contains TEXT (ignoring case)
  --source-topic T         read from topic T

output (ls, show):
  --json                   one JSON object a line
  --raw                    print record bytes as they are: show prints the value's bytes alone
                           (for a file or a pipe); ls and --json print without escaping.
                           Without --raw, control characters in keys, values, headers and
                           errors are shown escaped (\x1b), so that a record cannot act on
                           the terminal.

The brokers and the dead-letter topic (errors.dlq_topic) come from the config.
`

// dlqFlags are the flags of every dlq command.
type dlqFlags struct {
	cfg, offsets, stage, errText, sourceTopic, to, topic, admin, tokenFile, caFile string
	partition, limit, maxBytes, batch                                              int
	json, dryRun, raw, force                                                       bool
	maxRecords                                                                     int64
}

// DLQ is `streamd dlq ARGS`: it returns the exit code.
func DLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, dlqUsage)
		return 2
	}
	sub := args[0]
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "streamd dlq %s: %s\n", sub, fmt.Sprintf(format, a...))
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "streamd dlq %s: %v\n", sub, err)
		return 1
	}
	switch sub {
	case "ls", "show", "replay":
	default:
		return usage("unknown command %q (ls, show, replay)", sub)
	}
	var f dlqFlags
	fs := flag.NewFlagSet("streamd dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, dlqUsage) }
	fs.StringVar(&f.cfg, "c", "", "config file")
	fs.IntVar(&f.partition, "partition", -1, "partition of the dead-letter topic")
	fs.StringVar(&f.offsets, "offsets", "", "dead-letter offsets A-B (both included)")
	fs.StringVar(&f.stage, "stage", "", "stage that rejected the record")
	fs.StringVar(&f.errText, "error", "", "text the error contains")
	fs.StringVar(&f.sourceTopic, "source-topic", "", "topic the record was read from")
	fs.IntVar(&f.limit, "limit", 100, "ls: at most this many (0: all)")
	fs.IntVar(&f.maxBytes, "max-bytes", 0, "cut keys, values and headers at this many bytes (default: ls 60, show 65536)")
	fs.BoolVar(&f.json, "json", false, "one JSON object a line")
	fs.BoolVar(&f.raw, "raw", false, "print record bytes as they are (show: the value alone)")
	fs.StringVar(&f.to, "to", "source", "replay: source or pipeline")
	fs.StringVar(&f.topic, "topic", "", "replay --to source: this topic instead of each record's source topic")
	fs.BoolVar(&f.dryRun, "dry-run", false, "replay: only count")
	fs.IntVar(&f.batch, "batch", 500, "replay: records per batch")
	fs.Int64Var(&f.maxRecords, "max-records", 0, "replay: at most this many dead letters (0: all; --to pipeline: the daemon's bound)")
	fs.BoolVar(&f.force, "force", false, "replay: dead-letter again a replayed record rejected again")
	adminFlags(fs, &f.admin, &f.tokenFile, &f.caFile)
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return 2
	}
	if f.cfg == "" {
		return usage("-c config.toml is required")
	}
	want := 1
	if sub == "show" {
		want = 2
	}
	if len(pos) != want {
		if sub == "show" {
			return usage("want PIPELINE PARTITION@OFFSET, got %q", pos)
		}
		return usage("want one PIPELINE, got %q", pos)
	}
	filter, err := f.filter()
	if err != nil {
		return usage("%v", err)
	}
	if f.maxRecords < 0 {
		return usage("--max-records %d: want 1 or more (0: all)", f.maxRecords)
	}
	cfg, err := config.Load(f.cfg)
	if err != nil {
		fmt.Fprintf(stderr, "streamd dlq %s: invalid config:\n%v\n", sub, err)
		return 2
	}
	r, err := app.DLQReader(cfg, pos[0])
	if err != nil {
		return fail(err)
	}
	switch sub {
	case "ls":
		if f.maxBytes == 0 {
			f.maxBytes = 60
		}
		es, more, err := r.List(ctx, filter, f.limit)
		if err != nil {
			return fail(err)
		}
		out, flush := f.output(stdout)
		printEntries(out, r.Topic(), es, more, f)
		return flush()
	case "show":
		if f.maxBytes == 0 {
			f.maxBytes = 64 << 10
		}
		part, off, err := parsePosition(pos[1])
		if err != nil {
			return usage("%v", err)
		}
		e, err := r.Get(ctx, part, off)
		if err != nil {
			return fail(err)
		}
		if f.raw && !f.json {
			if e.Record.Value == nil {
				fmt.Fprintf(stderr, "streamd dlq show: %d@%d has no value (null, or left out of a truncated dead letter)\n", part, off)
				return 1
			}
			if _, err := stdout.Write(e.Record.Value); err != nil {
				return fail(err)
			}
			return 0
		}
		out, flush := f.output(stdout)
		printEntry(out, r.Topic(), &e, f)
		return flush()
	}
	switch f.to {
	case "source":
	case "pipeline":
		if f.topic != "" {
			return usage("--topic goes with --to source")
		}
		return replayThroughDaemon(ctx, cfg, pos[0], filter, f, stdout, stderr)
	default:
		return usage("--to %q: want source or pipeline", f.to)
	}
	if f.dryRun {
		return dryRun(ctx, r, filter, stdout, stderr)
	}
	ko, err := app.SourceOpts(cfg, pos[0])
	if err != nil {
		return fail(err)
	}
	cl, err := kgo.NewClient(append(ko, kgo.RecordPartitioner(dlq.Partitioner()))...)
	if err != nil {
		return fail(err)
	}
	defer cl.Close()
	pr, err := dlq.Replay(ctx, r, filter, dlq.ToTopic(cl, f.topic), dlq.ReplayOptions{Batch: f.batch, MaxRecords: f.maxRecords, Force: f.force, Progress: progressPrinter(stderr)})
	printProgress(stdout, pr, "replayed to "+targetName(f.topic))
	if err != nil {
		return fail(err)
	}
	return 0
}

// output is where a listing goes: stdout, through an escaping writer for
// --json unless --raw (the text output escapes each field itself); flush
// ends it and returns the exit code.
func (f *dlqFlags) output(stdout io.Writer) (io.Writer, func() int) {
	if !f.json || f.raw {
		return stdout, func() int { return 0 }
	}
	w := termsafe.NewWriter(stdout)
	return w, func() int {
		if w.Flush() != nil {
			return 1
		}
		return 0
	}
}

// text is a field of a record for the text output: escaped unless --raw.
func (f *dlqFlags) text(s string) string {
	if f.raw {
		return s
	}
	return termsafe.String(s)
}

func targetName(topic string) string {
	if topic == "" {
		return "their source topics"
	}
	return "topic " + topic
}

func (f *dlqFlags) filter() (dlq.Filter, error) {
	flt := dlq.Filter{Stage: f.stage, Error: f.errText, SourceTopic: f.sourceTopic}
	if f.partition >= 0 {
		flt.Partitions = []int32{int32(f.partition)}
	}
	if f.offsets != "" {
		a, b, ok := strings.Cut(f.offsets, "-")
		if !ok {
			return flt, fmt.Errorf("--offsets %q: want A-B, A- or -B", f.offsets)
		}
		if a != "" {
			n, err := strconv.ParseInt(a, 10, 64)
			if err != nil || n < 0 {
				return flt, fmt.Errorf("--offsets %q: %q is not an offset", f.offsets, a)
			}
			flt.From = n
		}
		if b != "" {
			n, err := strconv.ParseInt(b, 10, 64)
			if err != nil || n < flt.From {
				return flt, fmt.Errorf("--offsets %q: %q is not an offset at or above %d", f.offsets, b, flt.From)
			}
			flt.Until = n + 1
		}
	}
	return flt, nil
}

func parsePosition(s string) (int32, int64, error) {
	p, o, ok := strings.Cut(s, "@")
	pn, err1 := strconv.ParseInt(p, 10, 32)
	on, err2 := strconv.ParseInt(o, 10, 64)
	if !ok || err1 != nil || err2 != nil || pn < 0 || on < 0 {
		return 0, 0, fmt.Errorf("%q: want PARTITION@OFFSET, e.g. 0@42", s)
	}
	return int32(pn), on, nil
}

// parseInterleaved parses flags that may come before, between and after
// the positional arguments, which it returns.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// entryJSON is a dead letter as `--json` prints it.
type entryJSON struct {
	dlq.Entry
	Topic   string           `json:"topic"`
	Key     recview.Data     `json:"key"`
	Value   recview.Data     `json:"value"`
	Headers []recview.Header `json:"headers"`
}

func entryView(topic string, e *dlq.Entry, max int) entryJSON {
	v := recview.Of(&e.Record, max)
	return entryJSON{Entry: *e, Topic: topic, Key: v.Key, Value: v.Value, Headers: v.Headers}
}

func printEntries(w io.Writer, topic string, es []dlq.Entry, more bool, f dlqFlags) {
	if f.json {
		enc := json.NewEncoder(w)
		for i := range es {
			_ = enc.Encode(entryView(topic, &es[i], f.maxBytes))
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION@OFFSET\tTIME\tSTAGE\tSOURCE\tKEY\tKIND\tERROR")
	for i := range es {
		e := &es[i]
		errText := strings.ReplaceAll(e.Error, "\n", " ")
		if len(errText) > 100 {
			errText = errText[:97] + "..."
		}
		errText = f.text(errText)
		if e.Truncated != "" {
			errText = "[truncated: " + f.text(e.Truncated) + "] " + errText
		}
		kind := e.Kind
		if kind == "" {
			kind = "-" // a dead letter written before the kind header
		}
		fmt.Fprintf(tw, "%d@%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Partition, e.Offset, e.Time.UTC().Format(time.RFC3339), f.text(e.Stage), f.text(e.Source.String()),
			f.text(recview.Bytes(e.Record.Key, f.maxBytes).String()), f.text(kind), errText)
	}
	_ = tw.Flush()
	note := fmt.Sprintf("%d dead letters in %s", len(es), topic)
	if more {
		note = fmt.Sprintf("the first %d dead letters in %s (more: --limit 0 for all)", len(es), topic)
	}
	fmt.Fprintln(w, note)
}

func printEntry(w io.Writer, topic string, e *dlq.Entry, f dlqFlags) {
	v := entryView(topic, e, f.maxBytes)
	if f.json {
		_ = json.NewEncoder(w).Encode(v)
		return
	}
	fmt.Fprintf(w, "dead letter  %s/%d@%d  (%s)\n", topic, e.Partition, e.Offset, e.Time.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "source       %s\n", f.text(e.Source.String()))
	fmt.Fprintf(w, "stage        %s\n", f.text(e.Stage))
	if e.Plugin != "" {
		fmt.Fprintf(w, "plugin       %s\n", f.text(e.Plugin))
	}
	fmt.Fprintf(w, "error        %s\n", f.text(e.Error))
	if e.Kind != "" {
		fmt.Fprintf(w, "kind         %s\n", f.text(e.Kind))
	}
	if e.Detail != "" {
		lines := strings.Split(e.Detail, "\n")
		for i, l := range lines {
			lines[i] = f.text(l)
		}
		fmt.Fprintf(w, "detail       %s\n", strings.Join(lines, "\n             "))
	}
	if e.Truncated != "" {
		fmt.Fprintf(w, "truncated    %s (the dead-letter topic's size limit left it out: this one cannot be replayed)\n", f.text(e.Truncated))
	}
	fmt.Fprintln(w, "headers")
	for _, h := range v.Headers {
		fmt.Fprintf(w, "  %s: %s\n", f.text(h.Key), f.text(h.Value.String()))
	}
	fmt.Fprintf(w, "key          %s\n", f.text(v.Key.String()))
	fmt.Fprintf(w, "value        %s\n", f.text(v.Value.String()))
}

// progressPrinter prints progress to w at most once a second.
func progressPrinter(w io.Writer) func(dlq.Progress) {
	var mu sync.Mutex
	var last time.Time
	return func(p dlq.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Done || time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(w, "replay: read %d of %d dead-letter offsets, %d selected, %d replayed, %d skipped\n", p.Scanned, p.Total, p.Matched, p.Replayed, p.Skipped)
	}
}

func printProgress(w io.Writer, p dlq.Progress, what string) {
	fmt.Fprintf(w, "%d dead letters selected of %d read; %d %s; %d skipped (truncated)\n", p.Matched, p.Scanned, p.Replayed, what, p.Skipped)
	for _, s := range p.SkippedAt {
		fmt.Fprintf(w, "  skipped: %s\n", s)
	}
	if p.Err != "" || p.Stopped != "" {
		why := p.Err
		if why == "" {
			why = p.Stopped
		}
		fmt.Fprintf(w, "stopped early: %s\n", why)
		for part, next := range p.Resume {
			fmt.Fprintf(w, "  partition %d: replayed up to offset %d; resume with --partition %d --offsets %d-\n", part, next-1, part, next)
		}
	}
}

func dryRun(ctx context.Context, r *dlq.Reader, f dlq.Filter, stdout, stderr io.Writer) int {
	ranges, err := r.Ranges(ctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "streamd dlq replay: %v\n", err)
		return 1
	}
	var n, skipped int
	err = r.Scan(ctx, ranges, f, func(e *dlq.Entry) error {
		n++
		if e.Truncated != "" {
			skipped++
		}
		return nil
	}, nil)
	if err != nil {
		fmt.Fprintf(stderr, "streamd dlq replay: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "dry run: %d dead letters selected, %d would be replayed, %d skipped (truncated)\n", n, n-skipped, skipped)
	return 0
}
