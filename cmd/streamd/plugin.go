package main

import (
	"context"
	"io"

	"github.com/streamd/streamd/internal/plugincli"
)

// openPlugin opens a plugin reference: wasm:PATH, PATH.wasm or native:PATH.
var openPlugin plugincli.Opener = plugincli.OpenDefault

func cmdPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return plugincli.Main(ctx, args, stdout, stderr, openPlugin)
}
