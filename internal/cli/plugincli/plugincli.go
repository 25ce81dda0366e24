package plugincli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/streamd/streamd/internal/cli/termsafe"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// Main runs `streamd plugin ARGS...` and returns the exit code: 0 success,
// 1 a difference found by test, 2 usage or load error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, open plugins.OpenFunc) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		return 2
	}
	var err error
	code := 0
	switch args[0] {
	case "inspect":
		err = inspect(ctx, args[1:], stdout, stderr, open)
	case "run":
		err = runCmd(ctx, args[1:], stdout, stderr, open)
	case "test":
		code, err = testCmd(ctx, args[1:], stdout, stderr, open)
	case "new":
		err = newCmd(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "streamd plugin: unknown subcommand %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "streamd plugin %s: %v\n", args[0], err)
		}
		return 2
	}
	return code
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  streamd plugin new --lang go|rust|c|assemblyscript|wat --kind transform|codec|sink [--dir DIR] [--sdk DIR] NAME
  streamd plugin inspect FILE
  streamd plugin run FILE --input in.jsonl [flags]
  streamd plugin test FILE --input in.jsonl --expect out.jsonl [--messages] [flags]

FILE is wasm:PATH, PATH.wasm or native:PATH; a .wasm file may also be a
Redpanda data transform or a Fluvio SmartModule, whose environment
variables or params are --config's keys. Flags of run and test (the
limits default to a pipeline's defaults):
  --config JSON|@FILE      the plugin's config (default {})
  --op encode|decode       a codec's operation
  --batch N                records per call (default 1024)
  --batch-bytes N          key+value bytes per call (default 1048576)
  --max-record-bytes N     the Kafka sink's max_record_bytes: an output record
                           over it is refused as the sink refuses it (default
                           1048588; negative: no limit)
  --timeout D              bound of one call (default 5s; negative: none)
  --max-memory-pages N     memory cap of a Wasm instance, 64 KiB pages (default 256 = 16 MiB)
  --max-table-elements N   cap of each table of a Wasm instance (default 1048576 = 8 MiB)
  --max-module-bytes N     largest Wasm module file (default 67108864 = 64 MiB)
  --compile-timeout D      bound of compiling a Wasm module (default 1m)
  --max-log-line-bytes N   longest line a Wasm guest logs (default 4096)
  --max-log-lines-per-record N, --max-log-bytes-per-record N
                           what a Wasm guest logs in one call, per record (default 16, 16384)
  --pool N                 Wasm instances (default 2)
  --dir GUEST=HOST[:ro]    grant a Wasm plugin a host directory (repeatable)
  --clock                  grant the real clock (default: a fake one)
  --random=false           the same fixed "random" bytes in every run
  --output NAME            an output a Redpanda transform may write to by name
                           (REDPANDA_OUTPUT_TOPIC_N; repeatable; the first is the
                           default; default: one, "output")
  --input-topic NAME       its REDPANDA_INPUT_TOPIC (default "input")
  -v                       show the plugin's log on stderr
  --raw                    run: write the output as it is to a terminal too (by default,
                           control characters of records are written as JSON escapes,
                           \u009b, when the output is a terminal: the same JSON)
  --cache DIR              compiled Wasm cache ("" for none)
Docs: docs/plugins.md.
`)
}

type common struct {
	input, expect, config, op   string
	batch, batchBytes, pool     int
	maxRecordBytes              int
	maxPages, maxTable          uint
	maxModule                   int64
	compileTimeout              time.Duration
	logLine, logLines, logBytes int
	timeout                     time.Duration
	clock, random, messages     bool
	verbose, raw                bool
	cacheDir                    string
	dirs                        dirFlag
	outputs                     listFlag
	inputName                   string
}

// listFlag collects the values of a repeatable flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// dirFlag collects --dir GUEST=HOST grants.
type dirFlag map[string]string

func (d dirFlag) String() string { return fmt.Sprint(map[string]string(d)) }

func (d dirFlag) Set(v string) error {
	guest, host, ok := strings.Cut(v, "=")
	if !ok || guest == "" || host == "" {
		return fmt.Errorf("want GUEST=HOST, got %q", v)
	}
	d[guest] = host
	return nil
}

// defaultCacheDir is where compiled Wasm is kept between runs.
func defaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "streamd", "wasm")
}

func parseFlags(name string, args []string, stderr io.Writer, needInput, needExpect bool) (string, common, error) {
	c := common{dirs: dirFlag{}}
	fs := flag.NewFlagSet("streamd plugin "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if needInput {
		fs.StringVar(&c.input, "input", "", "input records, JSON lines (- for stdin)")
		fs.StringVar(&c.config, "config", "", "plugin config: a JSON object, or @FILE")
		fs.StringVar(&c.op, "op", "", "codec operation: encode or decode")
		fs.IntVar(&c.batch, "batch", pipeline.DefaultMaxRecords, "records per plugin call (a pipeline's batch.max_records)")
		fs.IntVar(&c.batchBytes, "batch-bytes", pipeline.DefaultMaxBytes, "key+value bytes per plugin call (a pipeline's batch.max_bytes)")
		fs.IntVar(&c.maxRecordBytes, "max-record-bytes", kafka.DefaultMaxRecordBytes, "the Kafka sink's max_record_bytes: a transform's or codec's output record over it is refused as the sink refuses it; negative: no limit")
		fs.DurationVar(&c.timeout, "timeout", plugins.DefaultTimeout, "bound of one plugin call; negative: none (trusted)")
		fs.UintVar(&c.maxPages, "max-memory-pages", plugins.DefaultMaxMemoryPages, "memory cap of a Wasm instance in 64 KiB pages")
		fs.UintVar(&c.maxTable, "max-table-elements", plugins.DefaultMaxTableElements, "cap of each table of a Wasm instance, in elements of 8 bytes")
		fs.Int64Var(&c.maxModule, "max-module-bytes", plugins.DefaultMaxModuleBytes, "largest Wasm module file")
		fs.DurationVar(&c.compileTimeout, "compile-timeout", plugins.DefaultCompileTimeout, "bound of compiling a Wasm module")
		fs.IntVar(&c.logLine, "max-log-line-bytes", plugins.DefaultMaxLogLineBytes, "longest line a Wasm guest logs")
		fs.IntVar(&c.logLines, "max-log-lines-per-record", plugins.DefaultMaxLogLinesPerRecord, "lines a Wasm guest may log in one call, per record")
		fs.IntVar(&c.logBytes, "max-log-bytes-per-record", plugins.DefaultMaxLogBytesPerRecord, "bytes a Wasm guest may log in one call, per record")
		fs.IntVar(&c.pool, "pool", pipeline.DefaultWorkers, "Wasm instances (a pipeline's pool, default its workers)")
		fs.Var(c.dirs, "dir", "grant a Wasm plugin a host directory, GUEST=HOST or GUEST=HOST:ro (repeatable)")
		fs.BoolVar(&c.clock, "clock", false, "grant a Wasm plugin the real clock")
		fs.BoolVar(&c.random, "random", true, "random bytes from crypto/rand; false: a fixed sequence")
		fs.Var(&c.outputs, "output", "an output a Redpanda transform may write to, by name; the first is the default (repeatable; default: one, \"output\")")
		fs.StringVar(&c.inputName, "input-topic", "", "the topic a Redpanda transform is told it reads (default \"input\")")
		if !needExpect {
			fs.BoolVar(&c.raw, "raw", false, "write the output as it is, to a terminal too")
		}
	}
	if needExpect {
		fs.StringVar(&c.expect, "expect", "", "expected output, JSON lines")
		fs.BoolVar(&c.messages, "messages", false, "also compare error messages (an expected message must be part of the actual one)")
	}
	fs.BoolVar(&c.verbose, "v", false, "show the plugin's log")
	fs.StringVar(&c.cacheDir, "cache", defaultCacheDir(), "compiled Wasm cache directory (empty: none)")
	// Accept the plugin file before or after the flags.
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", c, err
	}
	if file == "" && fs.NArg() > 0 {
		file = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return "", c, err
		}
	}
	switch {
	case file == "":
		return "", c, errors.New("missing plugin FILE")
	case fs.NArg() > 0:
		return "", c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case needInput && c.input == "":
		return "", c, errors.New("missing --input FILE")
	case needExpect && c.expect == "":
		return "", c, errors.New("missing --expect FILE")
	case needInput && c.batch < 1:
		return "", c, fmt.Errorf("--batch %d: must be at least 1", c.batch)
	case needInput && (c.maxRecordBytes == 0 || c.maxRecordBytes > 1<<30 || c.maxRecordBytes > 0 && c.maxRecordBytes < 512):
		return "", c, fmt.Errorf("--max-record-bytes %d: must be 512 to %d (a sink's max_record_bytes), or negative for no limit", c.maxRecordBytes, 1<<30)
	case needInput && c.batchBytes < 1:
		return "", c, fmt.Errorf("--batch-bytes %d: must be at least 1", c.batchBytes)
	case needInput && (c.maxPages < 1 || c.maxPages > 65536):
		return "", c, fmt.Errorf("--max-memory-pages %d: must be 1 to 65536 (4 GiB)", c.maxPages)
	case needInput && (c.maxTable < 1 || c.maxTable > 1<<28):
		return "", c, fmt.Errorf("--max-table-elements %d: must be 1 to 268435456", c.maxTable)
	case needInput && (c.maxModule < 1<<10 || c.maxModule > 1<<30):
		return "", c, fmt.Errorf("--max-module-bytes %d: must be 1024 to 1073741824", c.maxModule)
	case needInput && (c.compileTimeout < 100*time.Millisecond || c.compileTimeout > time.Hour):
		return "", c, fmt.Errorf("--compile-timeout %v: must be 100ms to 1h", c.compileTimeout)
	case needInput && (c.logLine < 16 || c.logLines < 1 || c.logBytes < 16):
		return "", c, fmt.Errorf("--max-log-line-bytes %d, --max-log-lines-per-record %d, --max-log-bytes-per-record %d: must be at least 16, 1 and 16",
			c.logLine, c.logLines, c.logBytes)
	case needInput && (c.pool < 1 || c.pool > 256):
		return "", c, fmt.Errorf("--pool %d: must be 1 to 256", c.pool)
	case needInput && c.timeout == 0:
		return "", c, errors.New("--timeout 0: give a duration (negative: no timeout)")
	}
	return file, c, nil
}

func options(c common, stderr io.Writer) (plugins.Options, error) {
	opts := plugins.Options{
		Logger:  slog.New(slog.DiscardHandler),
		Timeout: c.timeout,
		Pool:    c.pool,
		Wasm: plugins.WasmOptions{CacheDir: c.cacheDir, MaxMemoryPages: uint32(c.maxPages), Clock: c.clock, DeterministicRandom: !c.random,
			MaxTableElements: uint32(c.maxTable), MaxModuleBytes: c.maxModule, CompileTimeout: c.compileTimeout,
			MaxLogLineBytes: c.logLine, MaxLogLinesPerRecord: c.logLines, MaxLogBytesPerRecord: c.logBytes},
	}
	if len(c.dirs) > 0 {
		opts.Wasm.Dirs = c.dirs
	}
	opts.Wasm.Outputs, opts.Wasm.Input = c.outputs, c.inputName
	if c.verbose {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if c.config != "" {
		text, what := []byte(c.config), "--config"
		if path, ok := strings.CutPrefix(c.config, "@"); ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return opts, fmt.Errorf("--config: %w", err)
			}
			text, what = b, "--config "+c.config
		}
		if err := json.Unmarshal(text, &opts.Config); err != nil || opts.Config == nil {
			return opts, fmt.Errorf("%s: not a JSON object: %s", what, bytes.TrimSpace(text))
		}
	}
	return opts, nil
}

// summaryLine describes a run and the limits it ran with.
func summaryLine(s Summary, c common) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records in %d %s, %d out, ", s.In, s.Batches, plural(s.Batches, "batch", "batches"), s.Out)
	n := 0
	var parts []string
	for _, k := range kinds {
		if s.Errors[k] > 0 {
			n += s.Errors[k]
			parts = append(parts, fmt.Sprintf("%d %s", s.Errors[k], k))
		}
	}
	fmt.Fprintf(&b, "%d %s", n, plural(n, "error", "errors"))
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	if s.Isolated > 0 {
		fmt.Fprintf(&b, ", %d failed %s run record by record", s.Isolated, plural(s.Isolated, "batch", "batches"))
	}
	fmt.Fprintf(&b, ", %v; --timeout %v --max-memory-pages %d (%d MiB) --batch %d --batch-bytes %d --max-record-bytes %d --pool %d",
		s.Elapsed.Round(time.Millisecond), c.timeout, c.maxPages, c.maxPages/16, c.batch, c.batchBytes, c.maxRecordBytes, c.pool)
	if c.clock {
		b.WriteString(" --clock")
	}
	if !c.random {
		b.WriteString(" --random=false")
	}
	return b.String()
}

func plural(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

func inspect(ctx context.Context, args []string, stdout, stderr io.Writer, open plugins.OpenFunc) error {
	file, c, err := parseFlags("inspect", args, stderr, false, false)
	if err != nil {
		return err
	}
	opts, _ := options(c, stderr)
	p, err := open(ctx, file, opts)
	if err != nil {
		return err
	}
	defer func() { _ = p.Close(context.WithoutCancel(ctx)) }()
	// The manifest, and for a Wasm module the ABI it was written against
	// (a Redpanda transform or a Fluvio SmartModule has no manifest: its
	// name is its file's).
	out := struct {
		plugins.Manifest
		ABIName string `json:"abi_name,omitempty"`
	}{Manifest: p.Manifest()}
	if a, ok := p.(interface{ ABI() string }); ok {
		out.ABIName = a.ABI()
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer, open plugins.OpenFunc) error {
	file, c, err := parseFlags("run", args, stderr, true, false)
	if err != nil {
		return err
	}
	out, sum, err := runFile(ctx, file, c, stderr, open)
	if err != nil {
		return err
	}
	w := stdout
	if !c.raw && termsafe.IsTerminal(stdout) {
		// Records' control characters would act on the terminal.
		ts := termsafe.NewWriter(stdout)
		defer func() { _ = ts.Flush() }()
		w = ts
	}
	if _, err = w.Write(out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "streamd plugin run %s: %s\n", file, summaryLine(sum, c))
	return nil
}

func runFile(ctx context.Context, file string, c common, stderr io.Writer, open plugins.OpenFunc) ([]byte, Summary, error) {
	opts, err := options(c, stderr)
	if err != nil {
		return nil, Summary{}, err
	}
	recs, err := readRecords(c.input)
	if err != nil {
		return nil, Summary{}, err
	}
	p, err := open(ctx, file, opts)
	if err != nil {
		return nil, Summary{}, err
	}
	defer func() { _ = p.Close(context.WithoutCancel(ctx)) }()
	var buf bytes.Buffer
	sum, err := Run(ctx, p, RunOptions{Op: c.op, Batch: c.batch, BatchBytes: c.batchBytes, MaxRecordBytes: c.maxRecordBytes}, recs, &buf)
	if err != nil {
		return nil, sum, err
	}
	return buf.Bytes(), sum, nil
}

func testCmd(ctx context.Context, args []string, stdout, stderr io.Writer, open plugins.OpenFunc) (int, error) {
	file, c, err := parseFlags("test", args, stderr, true, true)
	if err != nil {
		return 2, err
	}
	want, err := os.ReadFile(c.expect)
	if err != nil {
		return 2, err
	}
	got, sum, err := runFile(ctx, file, c, stderr, open)
	if err != nil {
		return 2, err
	}
	diff, err := CompareWith(got, want, CompareOptions{Messages: c.messages})
	if err != nil {
		return 2, fmt.Errorf("%s: %w", c.expect, err)
	}
	if diff != "" {
		if termsafe.IsTerminal(stdout) {
			// Lines that quote records: each escaped.
			ls := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
			for i := range ls {
				ls[i] = termsafe.String(ls[i])
			}
			diff = strings.Join(ls, "\n") + "\n"
		}
		fmt.Fprintf(stdout, "FAIL %s: output differs from %s\n%s", file, c.expect, diff)
		fmt.Fprintf(stdout, "  %s\n", summaryLine(sum, c))
		return 1, nil
	}
	n := len(lines(want))
	fmt.Fprintf(stdout, "ok %s: %d %s match %s\n  %s\n", file, n, plural(n, "line", "lines"), c.expect, summaryLine(sum, c))
	return 0, nil
}

func readRecords(path string) ([]record.Record, error) {
	var r io.Reader
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	return DecodeRecords(r, path)
}

// DecodeRecords reads JSON-lines records (record.NewReader); blank lines
// are skipped, and so are result lines ({"error":...}, {"written":...}),
// so that the output of `streamd plugin run` is valid input.
func DecodeRecords(r io.Reader, name string) ([]record.Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var recs []record.Record
	for n := 1; sc.Scan(); n++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || isResultLine(b) {
			continue
		}
		rec, err := record.DecodeJSON(b)
		if err != nil {
			return nil, &record.LineError{Name: name, Line: n, Err: err}
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return recs, nil
}
