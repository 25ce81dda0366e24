package main

import (
	"context"
	"io"

	"github.com/streamd/streamd/internal/plugincli"
)

// openPlugin opens the plugin named by a reference; plugins/load.Open
// replaces it once every loader is wired.
var openPlugin plugincli.Opener = plugincli.OpenDefault

func cmdPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return plugincli.Main(ctx, args, stdout, stderr, openPlugin)
}
