package main

import (
	"context"
	"fmt"
	"io"
)

func cmdPlugin(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "streamd plugin: not implemented yet")
	return 2
}
