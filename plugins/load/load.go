// Package load is the one place that decides which loader runs a plugin:
// "wasm:PATH" or a path ending in ".wasm" loads a WebAssembly module in the
// sandboxed runtime; "native:PATH" starts a native plugin process.
package load

import (
	"context"
	"fmt"
	"strings"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/native"
	"github.com/streamd/streamd/plugins/wasm"
)

// Open loads the plugin that ref names with the loader Parse picks; it is
// a [plugins.OpenFunc], and so are the two loaders it picks from.
func Open(ctx context.Context, ref string, opts plugins.Options) (plugins.Plugin, error) {
	kind, path, err := Parse(ref)
	if err != nil {
		return nil, err
	}
	open := plugins.OpenFunc(wasm.Open)
	if kind == "native" {
		open = native.Open
	}
	return open(ctx, path, opts)
}

// Parse splits a plugin reference into its loader ("wasm" or "native") and
// path.
func Parse(ref string) (kind, path string, err error) {
	if k, p, ok := strings.Cut(ref, ":"); ok && (k == "wasm" || k == "native") {
		if p == "" {
			return "", "", fmt.Errorf("plugin %q: empty path", ref)
		}
		return k, p, nil
	}
	if strings.HasSuffix(ref, ".wasm") {
		return "wasm", ref, nil
	}
	return "", "", fmt.Errorf("plugin %q: want wasm:PATH, native:PATH or a path ending in .wasm", ref)
}
