package main

import (
	"context"
	"fmt"
	"io"
)

func cmdBroker(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "streamd broker: not implemented yet")
	return 2
}
