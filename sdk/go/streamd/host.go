//go:build !wasip1

package streamd

import (
	"fmt"
	"os"
)

// Log writes msg to standard error (streamd's log when run as a plugin).
func Log(level int, msg string) {
	fmt.Fprintf(os.Stderr, "streamd plugin log level %d: %s\n", level, msg)
}
