// Package config loads streamd's TOML configuration strictly: an unknown or
// misspelt key, a value of the wrong type or a missing required key is an
// error naming FILE:LINE[:COL] and the key path. String values may use
// ${ENV} interpolation ($${ is a literal "${").
package config
