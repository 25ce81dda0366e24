package app

import "github.com/streamd/streamd/plugins"

// FluidMetadata is (*App).fluidMetadata, for tests.
var FluidMetadata = (*App).fluidMetadata

// SetSinkWrap makes a wrap every pipeline's sink with w as it is built
// (before Run): a fault injector for tests.
func SetSinkWrap(a *App, w func(pipeline string, s plugins.Sink) plugins.Sink) { a.wrapSink = w }

// Idle reports whether no operation runs or waits in line.
func Idle(a *App) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.working && len(a.queue) == 0
}
