// Package config loads streamd's TOML configuration strictly: an unknown or
// misspelt key, a value of the wrong type or out of its range, or a missing
// required key is an error naming FILE:LINE[:COL], the key path and what is
// allowed. A key the file leaves out gets its default, which is the owning
// library package's Default* constant where there is one
// (pipeline.DefaultWorkers, plugins.DefaultTimeout, ...); a key the file
// sets means what it says, zero and "" included, or is refused. Nesting is
// bounded (MaxDepth) before the TOML parser runs, and an error lists at most
// MaxErrors problems. String values may use ${ENV} interpolation ($${ is a
// literal "${").
package config
