package plugins

import (
	"log/slog"
	"time"
)

// Options configure how a plugin is loaded. Every loader takes the same
// Options and ignores what does not apply to it.
type Options struct {
	// Kind is the kind the caller needs; a plugin of another kind is refused.
	// Empty accepts any kind.
	Kind Kind
	// Config is the plugin's own config table from TOML, passed to its init.
	Config map[string]any
	// Logger receives the plugin's log lines and stdout/stderr, tagged with
	// its name. Nil discards them.
	Logger *slog.Logger
	// CacheDir holds compiled modules (Wasm) so a restart does not recompile.
	// Empty disables the disk cache.
	CacheDir string
	// MaxMemoryPages caps a Wasm instance's memory in 64 KiB pages
	// (0: [DefaultMaxMemoryPages]).
	MaxMemoryPages uint32
	// Timeout bounds one call into the plugin (0: [DefaultTimeout]).
	// Negative: no timeout; a Wasm plugin is then trusted and compiled
	// without fuel checks (a little faster, but it cannot be stopped).
	Timeout time.Duration
	// Pool is how many instances (Wasm) may run calls in parallel
	// (0: the loader's default).
	Pool int
	// Dirs grants a Wasm guest access to host directories: guest path ->
	// host path, read-write, or read-only when the host path ends in ":ro"
	// (":rw" is also accepted). No path, link or rename leads the guest
	// outside a granted directory (docs/abi.md section 11). Nothing is
	// granted by default.
	Dirs map[string]string
	// Clock grants a Wasm guest the host's clocks: the real wall-clock and
	// monotonic time, and sleeps that sleep (a call still ends at Timeout).
	// Without it the guest's clocks are fake: the wall clock starts at
	// 2022-01-01T00:00:00Z and both advance 1 ms per reading; sleeps
	// return at once (docs/abi.md section 11).
	Clock bool
	// DeterministicRandom gives a Wasm guest the same fixed sequence of
	// "random" bytes in every instance and run, for reproducible tests,
	// instead of crypto/rand (the default).
	DeterministicRandom bool
	// Checksum is the SHA-256 (hex) a native plugin binary must have; empty
	// skips the check.
	Checksum string
	// Watch makes a Wasm plugin reload its file when it changes, checking
	// every Watch; the new module is swapped in between batches. 0 disables
	// watching (a reload can still be asked for, e.g. on SIGHUP).
	Watch time.Duration
	// ShutdownTimeout bounds how long a native plugin may take to exit
	// before it is killed (0: the loader's default).
	ShutdownTimeout time.Duration
}
