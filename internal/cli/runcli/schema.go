package runcli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/streamd/streamd/internal/daemon/app"
)

// Schema is `streamd schema check -c FILE`: it resolves every subject the
// config's schema stages name against their registries, registering
// nothing, and prints one line per stage and topic. Exit 0 if all
// resolve, 1 if any does not (or a registry cannot be reached), 2 for a
// bad config.
func Schema(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: streamd schema check -c FILE")
		return 2
	}
	cfg, _ := loadConfig("schema check", args[1:], stderr)
	if cfg == nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	checks := app.CheckSchemas(ctx, cfg, app.Logger(cfg.Log, io.Discard))
	if len(checks) == 0 {
		fmt.Fprintf(stdout, "%s: no schema stages\n", cfg.File)
		return 0
	}
	bad := 0
	for _, c := range checks {
		where := fmt.Sprintf("pipeline %q stage %q (%s)", c.Pipeline, c.Stage, c.Mode)
		if c.Mode == "fluid" {
			where = "[fluid] metadata " + c.Stage
		}
		if c.Topic != "" {
			where += " topic " + c.Topic
		}
		if c.Subject != "" {
			where += ": subject " + c.Subject
		}
		if c.Err != nil {
			bad++
			fmt.Fprintf(stdout, "FAIL %s: %v\n", where, c.Err)
			continue
		}
		fmt.Fprintf(stdout, "ok   %s: %s\n", where, c.Note)
	}
	if bad > 0 {
		fmt.Fprintf(stdout, "%s: %d of %d schema checks failed\n", cfg.File, bad, len(checks))
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%d schema checks)\n", cfg.File, len(checks))
	return 0
}
