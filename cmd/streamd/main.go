// Command streamd runs declarative TOML pipelines of consume -> transform ->
// produce stages over Apache Kafka, with plugins behind one versioned ABI.
//
// Usage:
//
//	streamd run -c config.toml       run the daemon
//	streamd init FOLDER              write a starter config and plugin
//	streamd lint -c config.toml      validate config and load every plugin (exit 0 or 2)
//	streamd broker [--listen A] [--data-dir D]   the embedded broker alone
//	streamd plugin new|inspect|run|test ...
//	streamd test FILE.toml...   run the pipeline tests in FILE
//	streamd journal append|read|pointer|delete|purge ...
//	streamd fluid check|bridge ...
//	streamd schema check -c config.toml   resolve every subject the config names
//	streamd dlq ls|show|replay -c config.toml PIPELINE ...
//	streamd tap -c config.toml PIPELINE [STAGE]   sample records into and out of stages
//	streamd ctl status|pause|resume|restart|reload   control a running daemon
//	streamd version
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/streamd/streamd/internal/cli/brokercli"
	"github.com/streamd/streamd/internal/cli/fluidcli"
	"github.com/streamd/streamd/internal/cli/initcli"
	"github.com/streamd/streamd/internal/cli/journalcli"
	"github.com/streamd/streamd/internal/cli/opscli"
	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/cli/runcli"
	"github.com/streamd/streamd/internal/cli/testcli"
)

// version and commit are set at build time with -ldflags "-X
// main.version=... -X main.commit=..." (scripts/dist).
var (
	version = "0.1.0-dev"
	commit  = "unknown"
)

// command is one subcommand: it returns the process exit code. Each
// command's implementation is a package of internal/cli.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) int

func commands() map[string]command {
	return map[string]command{
		"run":    runcli.Run,
		"init":   initcli.Main,
		"lint":   runcli.Lint,
		"broker": brokercli.Main,
		"plugin": func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			return plugincli.Main(ctx, args, stdout, stderr, plugincli.OpenDefault)
		},
		"journal": journalcli.Main,
		"fluid":   fluidcli.Main,
		"schema":  runcli.Schema,
		"test":    testcli.Main,
		"dlq":     opscli.DLQ,
		"tap":     opscli.Tap,
		"ctl":     opscli.Ctl,
		"version": func(_ context.Context, _ []string, stdout, _ io.Writer) int {
			fmt.Fprintf(stdout, "streamd %s (commit %s, %s, %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return 0
		},
	}
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 2
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "streamd: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cmd(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: streamd <command> [flags]

commands:
  run -c FILE        run the pipelines in FILE
  init FOLDER        write a starter config and Wasm plugin into FOLDER (streamd init -h)
  lint -c FILE       validate FILE and load every plugin it names; exit 0 or 2
  broker             run the embedded Kafka broker alone (streamd broker -h)
  plugin             make, inspect, run or test a plugin (streamd plugin -h)
  test FILE.toml...  run the [[pipeline.test]] fixtures of FILE: stages and error policy, no broker
  journal            append to and read event journals (streamd journal -h)
  fluid              Fluid Messaging: check metadata, run the bridge (streamd fluid -h)
  schema check -c FILE  resolve every Schema Registry subject FILE names; exit 0, 1 or 2
  dlq                list, show and replay a pipeline's dead letters (streamd dlq -h)
  tap -c FILE PIPELINE [STAGE]  a sample of the records into and out of a stage (streamd tap -h)
  ctl                status, pause, resume, restart, reload a running daemon (streamd ctl -h)
  version            print the version and the commit it was built from
`)
}
