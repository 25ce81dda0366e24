package plugincli

import (
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

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// Opener opens the plugin named by ref ("wasm:PATH", "PATH.wasm",
// "native:PATH").
type Opener func(ctx context.Context, ref string, opts plugins.Options) (plugins.Plugin, error)

// DefaultBatch is how many records run sends to a plugin per call.
const DefaultBatch = 256

// Main runs `streamd plugin ARGS...` and returns the exit code: 0 success,
// 1 a difference found by test, 2 usage or load error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, open Opener) int {
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
  streamd plugin inspect FILE
  streamd plugin run FILE --input in.jsonl [--config JSON] [--op encode|decode] [--batch N] [--dir GUEST=HOST]...
  streamd plugin test FILE --input in.jsonl --expect out.jsonl [same flags as run]

FILE is wasm:PATH, PATH.wasm or native:PATH.
`)
}

type common struct {
	input, expect, config, op string
	batch                     int
	verbose                   bool
	cacheDir                  string
	dirs                      dirFlag
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
		fs.StringVar(&c.config, "config", "", "plugin config as a JSON object")
		fs.StringVar(&c.op, "op", "", "codec operation: encode or decode")
		fs.IntVar(&c.batch, "batch", DefaultBatch, "records per plugin call")
		fs.Var(c.dirs, "dir", "grant a Wasm plugin a host directory, GUEST=HOST (repeatable)")
	}
	if needExpect {
		fs.StringVar(&c.expect, "expect", "", "expected output, JSON lines")
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
	}
	return file, c, nil
}

func options(c common, stderr io.Writer) (plugins.Options, error) {
	opts := plugins.Options{Logger: slog.New(slog.DiscardHandler), CacheDir: c.cacheDir}
	if len(c.dirs) > 0 {
		opts.Dirs = c.dirs
	}
	if c.verbose {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if c.config != "" {
		if err := json.Unmarshal([]byte(c.config), &opts.Config); err != nil || opts.Config == nil {
			return opts, fmt.Errorf("--config: not a JSON object: %s", c.config)
		}
	}
	return opts, nil
}

func inspect(ctx context.Context, args []string, stdout, stderr io.Writer, open Opener) error {
	file, c, err := parseFlags("inspect", args, stderr, false, false)
	if err != nil {
		return err
	}
	opts, _ := options(c, stderr)
	p, err := open(ctx, file, opts)
	if err != nil {
		return err
	}
	defer p.Close(context.WithoutCancel(ctx))
	b, err := json.Marshal(p.Manifest())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer, open Opener) error {
	file, c, err := parseFlags("run", args, stderr, true, false)
	if err != nil {
		return err
	}
	out, err := runFile(ctx, file, c, stderr, open)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

func runFile(ctx context.Context, file string, c common, stderr io.Writer, open Opener) ([]byte, error) {
	opts, err := options(c, stderr)
	if err != nil {
		return nil, err
	}
	recs, err := readRecords(c.input)
	if err != nil {
		return nil, err
	}
	p, err := open(ctx, file, opts)
	if err != nil {
		return nil, err
	}
	defer p.Close(context.WithoutCancel(ctx))
	var buf bytes.Buffer
	if err := Run(ctx, p, RunOptions{Op: c.op, Batch: c.batch}, recs, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func testCmd(ctx context.Context, args []string, stdout, stderr io.Writer, open Opener) (int, error) {
	file, c, err := parseFlags("test", args, stderr, true, true)
	if err != nil {
		return 2, err
	}
	want, err := os.ReadFile(c.expect)
	if err != nil {
		return 2, err
	}
	got, err := runFile(ctx, file, c, stderr, open)
	if err != nil {
		return 2, err
	}
	diff, err := Compare(got, want)
	if err != nil {
		return 2, fmt.Errorf("%s: %w", c.expect, err)
	}
	if diff != "" {
		fmt.Fprintf(stdout, "FAIL %s: output differs from %s\n%s", file, c.expect, diff)
		return 1, nil
	}
	n := bytes.Count(want, []byte("\n"))
	fmt.Fprintf(stdout, "ok %s: %d lines match %s\n", file, n, c.expect)
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
		defer f.Close()
		r = f
	}
	return DecodeRecords(r, path)
}

// DecodeRecords reads JSON-lines records (record.NewReader); blank lines
// are skipped.
func DecodeRecords(r io.Reader, name string) ([]record.Record, error) {
	rd := record.NewReader(r, name)
	var recs []record.Record
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
}
