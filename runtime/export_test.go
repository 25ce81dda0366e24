package runtime

import "github.com/streamd/streamd/runtime/internal/fuel"

// SetRewrite makes h instrument modules with f instead of fuel.Rewrite,
// so that a test can give it a module the instrumentation cannot read.
func SetRewrite(h *Host, f func(bin []byte, o fuel.Options) ([]byte, error)) {
	h.rewrite = f
}
