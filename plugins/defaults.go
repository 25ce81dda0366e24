package plugins

import "time"

// Defaults for the zero values of [Options], the same for every loader.
const (
	// DefaultTimeout bounds one call into a plugin when Options.Timeout is
	// 0, for Wasm and native plugins alike.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxMemoryPages caps a Wasm instance's memory when
	// Options.MaxMemoryPages is 0: 256 pages of 64 KiB, 16 MiB.
	DefaultMaxMemoryPages = 256
)
