package main

import (
	"context"
	"fmt"
	"io"
)

func cmdRun(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "streamd run: not implemented yet")
	return 2
}
