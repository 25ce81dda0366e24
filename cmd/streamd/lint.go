package main

import (
	"context"
	"fmt"
	"io"
)

func cmdLint(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "streamd lint: not implemented yet")
	return 2
}
