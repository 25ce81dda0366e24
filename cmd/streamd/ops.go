package main

import (
	"context"
	"io"

	"github.com/streamd/streamd/internal/cli/opscli"
)

func cmdDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return opscli.DLQ(ctx, args, stdout, stderr)
}

func cmdTap(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return opscli.Tap(ctx, args, stdout, stderr)
}
