// Command benchuser measures streamd as a user runs it: the broker in its
// own process (`streamd broker`, franz-go's kfake, or an Apache Kafka),
// streamd started as its own process with `streamd run -c FILE`, and a bare
// franz-go consume -> produce loop (this program's `bare` command) as the
// reference, each timed from its process start until the output holds
// every record, with the CPU time and peak resident set of each process
// read from /proc. scripts/bench-user builds it and runs it; docs/
// benchmarks.md ("Pipeline vs the bare loop, as a user runs it") has the figures.
//
// Commands:
//
//	benchuser throughput [flags]   records already in a topic, moved by each row in interleaved rounds
//	benchuser latency [flags]      records produced at a steady rate; produce-to-output latency
//	benchuser idle [flags]         idle pipelines per daemon: memory and CPU
//	benchuser bare [flags]         the bare franz-go loop (a process the others start)
//	benchuser summary FILE...      medians, spreads and ratios of result files
//
// Every measuring command appends one JSON object a run to -out, and
// prints a summary when done.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "throughput":
		err = cmdThroughput(ctx, os.Args[2:])
	case "latency":
		err = cmdLatency(ctx, os.Args[2:])
	case "idle":
		err = cmdIdle(ctx, os.Args[2:])
	case "bare":
		err = cmdBare(ctx, os.Args[2:])
	case "summary":
		err = cmdSummary(os.Args[2:])
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchuser:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: benchuser throughput|latency|idle|bare|summary [flags]
  throughput  records already in a topic, moved by each row, interleaved rounds
  latency     records at a steady rate, produce-to-output latency
  idle        idle pipelines per daemon: memory and CPU
  bare        the bare franz-go consume -> produce loop (a process)
  summary     medians and ratios of result files (JSON lines)
run "benchuser COMMAND -h" for a command's flags
`)
}
