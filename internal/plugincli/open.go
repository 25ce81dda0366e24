package plugincli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
)

// ErrNativeNotWired is returned by OpenDefault for native: plugins.
var ErrNativeNotWired = errors.New("native plugins not wired yet: the native loader (plugins/load) is not connected to this command")

// OpenDefault opens "wasm:PATH" and "PATH.wasm" with plugins/wasm; it is
// the Opener until plugins/load exists.
func OpenDefault(ctx context.Context, ref string, opts plugins.Options) (plugins.Plugin, error) {
	switch {
	case strings.HasPrefix(ref, "wasm:"):
		return wasm.Open(ctx, strings.TrimPrefix(ref, "wasm:"), opts)
	case strings.HasPrefix(ref, "native:"):
		return nil, fmt.Errorf("%s: %w", ref, ErrNativeNotWired)
	case strings.HasSuffix(ref, ".wasm"):
		return wasm.Open(ctx, ref, opts)
	}
	return nil, fmt.Errorf("%s: unknown plugin reference: want wasm:PATH, PATH.wasm or native:PATH", ref)
}
