package testcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/file"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/plugins/load"
	"github.com/streamd/streamd/record"
)

// Main runs `streamd test FILE.toml...`: each [[pipeline.test]] of each
// file runs its pipeline's stages and error policy (app.BuildTest) over the
// test's input, and what the sink and the dead-letter queue received, and
// how the pipeline ended, are compared with the test's expectations. No
// broker is needed. Exit 0 when every test passes, 1 when one fails, 2 on
// a usage, config or load error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("streamd test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: streamd test [flags] FILE.toml...

Runs the [[pipeline.test]] tables of each config: the pipeline's transform
stages and error policy over the test's input (a JSON-lines file), without
a broker, comparing what the sink would receive with its output file, the
dead letters with its dlq file, and the pipeline's failure with its error.
docs/plugins.md, "Pipeline tests".

`)
		fs.PrintDefaults()
	}
	only := fs.String("pipeline", "", "run only the tests of this pipeline")
	update := fs.Bool("update", false, "write what the pipeline did into the tests' output and dlq files instead of comparing")
	verbose := fs.Bool("v", false, "show the pipeline's and plugins' log")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound of one test")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	level := slog.LevelError + 1 // nothing: a test reports what matters
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	code, ran := 0, 0
	for _, file := range fs.Args() {
		cfg, err := config.LoadForTest(file) // a test uses no broker
		if err == nil {
			err = cfg.CheckHostDirs()
		}
		if err != nil {
			fmt.Fprintf(stderr, "streamd test: invalid config:\n%v\n", err)
			return 2
		}
		// Compiled plugins go to the user's cache, as for streamd plugin
		// run, not under the config's data_dir: a test writes nothing
		// next to the file it tests.
		cfg.Plugins.CacheDir = ""
		if d, err := os.UserCacheDir(); err == nil {
			cfg.Plugins.CacheDir = filepath.Join(d, "streamd", "wasm")
		}
		for i := range cfg.Pipelines {
			pc := &cfg.Pipelines[i]
			if *only != "" && pc.Name != *only {
				continue
			}
			for j := range pc.Tests {
				ran++
				tctx, cancel := context.WithTimeout(ctx, *timeout)
				c := runPipelineTest(tctx, cfg, i, j, log, *update, stdout, stderr)
				cancel()
				code = max(code, c)
				if ctx.Err() != nil {
					return max(code, 2)
				}
			}
		}
	}
	if ran == 0 {
		fmt.Fprintf(stderr, "streamd test: no [[pipeline.test]] in %s\n", strings.Join(fs.Args(), ", "))
		return 2
	}
	return code
}

// captureSink keeps what a pipeline writes. With maxBytes it refuses a
// record as a Kafka sink with that max_record_bytes does.
type captureSink struct {
	maxBytes int32 // 0: no limit
	mu       sync.Mutex
	recs     []record.Record
}

func (s *captureSink) Write(_ context.Context, batch []record.Record) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(batch))
	for i := range batch {
		if s.maxBytes > 0 {
			if errs[i] = kafka.CheckRecordSize(&batch[i], s.maxBytes); errs[i] != nil {
				continue
			}
		}
		s.recs = append(s.recs, batch[i].Clone())
	}
	return errs, nil
}

func (s *captureSink) jsonLines() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b []byte
	for i := range s.recs {
		b = record.AppendJSON(b, &s.recs[i])
		b = append(b, '\n')
	}
	return b
}

// runPipelineTest runs test j of pipeline i and reports it; it returns 0
// (passed), 1 (failed) or 2 (could not run).
func runPipelineTest(ctx context.Context, cfg *config.Config, i, j int, log *slog.Logger, update bool, stdout, stderr io.Writer) int {
	pc := &cfg.Pipelines[i]
	t := &pc.Tests[j]
	what := fmt.Sprintf("%s %s/%s", cfg.File, pc.Name, t.Name)
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "streamd test: %s: %s\n", what, fmt.Sprintf(format, args...))
		return 2
	}
	src, err := file.NewSource(cfg.Resolve(t.Input))
	if err != nil {
		return fail("input: %v", err)
	}
	// The limits of the pipeline's Kafka producers: the sink's (a Kafka
	// sink) and the dead-letter topic's, which has the sink's
	// max_record_bytes.
	out, dlq := &captureSink{}, &captureSink{maxBytes: int32(pc.Sink.MaxRecordBytes)}
	if pc.Sink.Type == "kafka" {
		out.maxBytes = dlq.maxBytes
	}
	p, err := app.BuildTest(ctx, cfg, i, log, load.Open, src, out, dlq)
	if err != nil {
		return fail("%v", err)
	}
	start := time.Now()
	runErr := p.Run(ctx)
	took := time.Since(start)
	counts := p.Status().Counts
	if err := p.Close(context.WithoutCancel(ctx)); err != nil {
		log.Warn("close", "err", err)
	}
	if ctx.Err() != nil {
		return fail("did not end within the test's time (-timeout): %v", runErr)
	}
	gotOut, gotDLQ := out.jsonLines(), dlq.jsonLines()
	if update {
		for _, f := range []struct {
			key, path string
			got       []byte
		}{{"output", t.Output, gotOut}, {"dlq", t.DLQ, gotDLQ}} {
			switch {
			case f.path != "":
				if err := os.WriteFile(cfg.Resolve(f.path), f.got, 0o644); err != nil {
					return fail("%v", err)
				}
			case len(f.got) > 0:
				return fail("the pipeline wrote %s records, but the test has no %s file to write them to", f.key, f.key)
			}
		}
	}
	var diffs []string
	switch {
	case t.Error == "" && runErr != nil:
		diffs = append(diffs, fmt.Sprintf("the pipeline failed: %v", runErr))
	case t.Error != "" && runErr == nil:
		diffs = append(diffs, fmt.Sprintf("the pipeline did not fail; want a failure with %q", t.Error))
	case t.Error != "" && !strings.Contains(runErr.Error(), t.Error):
		diffs = append(diffs, fmt.Sprintf("the pipeline failed with %q; want %q in it", runErr, t.Error))
	}
	for _, f := range []struct {
		key, path string
		got       []byte
		opts      plugincli.CompareOptions
	}{
		{"output", t.Output, gotOut, plugincli.CompareOptions{}},
		{"dlq", t.DLQ, gotDLQ, plugincli.CompareOptions{
			ContainsHeaders: []string{pipeline.HeaderError, pipeline.HeaderErrorDetail},
			OptionalHeaders: []string{pipeline.HeaderErrorDetail, pipeline.HeaderErrorKind},
		}},
	} {
		var want []byte
		if f.path != "" {
			if want, err = os.ReadFile(cfg.Resolve(f.path)); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return fail("%s: %v: to write what the pipeline does into it (then read it): streamd test --update %s",
						f.key, err, shellQuote(cfg.File))
				}
				return fail("%s: %v", f.key, err)
			}
		}
		diff, err := plugincli.CompareWith(f.got, want, f.opts)
		if err != nil {
			return fail("%s %s: %v", f.key, f.path, err)
		}
		if diff != "" {
			name := f.path
			if name == "" {
				name = "(none expected: the test has no " + f.key + " file)"
			}
			diffs = append(diffs, fmt.Sprintf("%s differs from %s\n%s", f.key, name, strings.TrimRight(diff, "\n")))
		}
	}
	summary := fmt.Sprintf("%d records in, %d out, %d rejected (%d to the dead-letter queue, %d dropped), %v",
		counts.In, counts.Out, counts.Errors, counts.DLQ, counts.Dropped, took.Round(time.Millisecond))
	if runErr != nil {
		summary += "; failed: " + firstLine(runErr.Error())
	}
	if len(diffs) > 0 {
		fmt.Fprintf(stdout, "FAIL %s: %s\n", what, summary)
		for _, d := range diffs {
			fmt.Fprintf(stdout, "  %s\n", strings.ReplaceAll(d, "\n", "\n  "))
		}
		return 1
	}
	verb := "ok"
	if update {
		verb = "updated"
	}
	fmt.Fprintf(stdout, "%s %s: %s\n", verb, what, summary)
	return 0
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// shellQuote quotes s for a shell command line, when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
