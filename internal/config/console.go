package config

// Console configures the operator's console served at /ui/ on the admin
// listener.
type Console struct {
	// Enabled serves the console when [admin] listen is set (default true).
	Enabled bool `toml:"enabled"`
}

func (c *Config) consoleDefaults() {
	if !c.isSet("console.enabled") {
		c.Console.Enabled = true
	}
}
