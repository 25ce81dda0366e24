package native

import "github.com/streamd/streamd/plugins"

// Exports for the external tests (package native_test), which import
// packages that import this one (internal/cli/plugincli, plugins/load).
var (
	BuildPlugin = buildPlugin
	ProcessGone = processGone
	LogLines    = logLines
)

// SyncBuffer is syncBuffer for external tests.
type SyncBuffer = syncBuffer

// PID is the plugin's current process id.
func PID(p plugins.Plugin) int { return p.(interface{ sup() *supervisor }).sup().pid() }
