package main

import (
	"context"
	"io"

	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/plugins"
)

// openPlugin opens a plugin reference: wasm:PATH, PATH.wasm or native:PATH.
var openPlugin plugins.OpenFunc = plugincli.OpenDefault

func cmdPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return plugincli.Main(ctx, args, stdout, stderr, openPlugin)
}
