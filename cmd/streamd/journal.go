package main

import (
	"context"
	"fmt"
	"io"
)

func cmdJournal(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "streamd journal: not implemented yet")
	return 2
}
