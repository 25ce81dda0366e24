package config

import "github.com/streamd/streamd/internal/daemon/defaults"

// Console configures the operator's console served at /ui/ on the admin
// listener, and its taps.
type Console struct {
	// Enabled serves the console when [admin] listen is set (default true).
	Enabled bool `toml:"enabled"`
	// TapMaxRate is the most records per second one tap samples (default
	// defaults.TapRate).
	TapMaxRate int `toml:"tap_max_rate"`
	// TapMaxValueBytes is where a tap cuts keys, values and headers
	// (default defaults.TapValueBytes).
	TapMaxValueBytes int `toml:"tap_max_value_bytes"`
	// TapMaxOpen is how many taps may be open at once (default
	// defaults.TapOpen).
	TapMaxOpen int `toml:"tap_max_open"`
	// ReplayMaxRecords bounds the dead letters one replay of the console
	// (and of `streamd dlq replay --to pipeline`) selects (default
	// defaults.ReplayMaxRecords).
	ReplayMaxRecords int64 `toml:"replay_max_records"`
}

var (
	rangeTapRate  = intRange{lo: 1, hi: 1000}
	rangeTapBytes = intRange{lo: 16, hi: 1 << 20}
	rangeTapOpen  = intRange{lo: 1, hi: 64}
	rangeReplay   = intRange{lo: 1, hi: 1 << 40}
)

func (c *Config) consoleDefaults() {
	setDefault(c, "console.enabled", &c.Console.Enabled, true)
	setDefault(c, "console.tap_max_rate", &c.Console.TapMaxRate, defaults.TapRate)
	setDefault(c, "console.tap_max_value_bytes", &c.Console.TapMaxValueBytes, defaults.TapValueBytes)
	setDefault(c, "console.tap_max_open", &c.Console.TapMaxOpen, defaults.TapOpen)
	setDefault(c, "console.replay_max_records", &c.Console.ReplayMaxRecords, defaults.ReplayMaxRecords)
}

func (c *Config) validateConsole(k *checker) {
	k.int("console.tap_max_rate", int64(c.Console.TapMaxRate), rangeTapRate)
	k.int("console.tap_max_value_bytes", int64(c.Console.TapMaxValueBytes), rangeTapBytes)
	k.int("console.tap_max_open", int64(c.Console.TapMaxOpen), rangeTapOpen)
	k.int("console.replay_max_records", c.Console.ReplayMaxRecords, rangeReplay)
}
