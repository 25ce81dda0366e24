package main

import (
	"context"
	"fmt"
	"io"
)

func cmdFluid(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "streamd fluid: not implemented yet")
	return 2
}
