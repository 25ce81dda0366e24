package plugincli

import (
	"context"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/load"
)

// OpenDefault opens "wasm:PATH", "PATH.wasm" and "native:PATH" with
// plugins/load.
func OpenDefault(ctx context.Context, ref string, opts plugins.Options) (plugins.Plugin, error) {
	return load.Open(ctx, ref, opts)
}
