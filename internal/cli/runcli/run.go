package runcli

import (
	"context"

	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/sdnotify"
	"github.com/streamd/streamd/plugins/load"
)

// loadConfig parses -c FILE; it prints errors and returns nil on failure.
func loadConfig(name string, args []string, stderr io.Writer) (*config.Config, []string) {
	fs := flag.NewFlagSet("streamd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("c", "config.toml", "config file")
	if err := fs.Parse(args); err != nil {
		return nil, nil
	}
	cfg, err := config.Load(*file)
	if err != nil {
		fmt.Fprintf(stderr, "streamd %s: invalid config:\n%v\n", name, err)
		return nil, nil
	}
	return cfg, fs.Args()
}

// Run is `streamd run -c FILE`: the daemon, until ctx is done (SIGINT,
// SIGTERM); SIGHUP reloads FILE. It exits 2 on a bad config, 1 on a
// failure while running.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, _ := loadConfig("run", args, stderr)
	if cfg == nil {
		return 2
	}
	log := app.Logger(cfg.Log, stderr)
	// The pipelines are built by Run, once the admin listener is open: a
	// pipeline whose plugins do not load fails alone.
	a, err := app.New(ctx, cfg, log, load.Open, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "streamd run: %v\n", cfg.RedactError(err))
		return 2
	}
	defer func() {
		// Not cancelled with ctx (the signal that stops the daemon).
		if err := a.Close(context.WithoutCancel(ctx)); err != nil {
			log.Warn("close", "err", err)
		}
	}()
	// systemd (Type=notify): readiness, reloads, stopping, the watchdog.
	sd := sdnotify.New(a.Statuses, log)
	a.SetReloadHooks(sd.Reloading, sd.Reloaded)
	sdCtx, stopSD := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSD()
	go sd.Run(sdCtx)
	go func() {
		select {
		case <-ctx.Done():
			sd.Stopping()
		case <-sdCtx.Done():
		}
	}()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go a.ReloadOn(ctx, hup)
	start := time.Now()
	err = a.Run(ctx)
	log.Info("streamd stopped", "uptime", time.Since(start).Round(time.Millisecond))
	if err != nil {
		fmt.Fprintf(stderr, "streamd run: %v\n", cfg.RedactError(err))
		return 1
	}
	return 0
}

// Lint is `streamd lint -c FILE`: the config checked and every plugin it
// names loaded, nothing started; exit 0, or 2 with what is wrong.
func Lint(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, _ := loadConfig("lint", args, stderr)
	if cfg == nil {
		return 2
	}
	if err := cfg.CheckHostDirs(); err != nil {
		fmt.Fprintf(stderr, "streamd lint: invalid config:\n%v\n", err)
		return 2
	}
	log := app.Logger(cfg.Log, stderr)
	a, err := app.Build(ctx, cfg, log, load.Open, io.Discard)
	if err != nil {
		fmt.Fprintf(stderr, "streamd lint: %v\n", cfg.RedactError(err))
		return 2
	}
	n := len(a.Plugins())
	if err := a.Close(context.WithoutCancel(ctx)); err != nil {
		log.Warn("close", "err", err)
	}
	fmt.Fprintf(stdout, "%s: ok (%d pipelines, %d plugins loaded)\n", cfg.File, len(cfg.Pipelines), n)
	return 0
}
