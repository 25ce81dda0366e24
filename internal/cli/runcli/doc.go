// Package runcli is `streamd run` (the daemon), `streamd lint` (a config
// checked and its plugins loaded, nothing started) and `streamd schema
// check` (every Schema Registry subject a config names, resolved): the
// commands that take -c config.toml and assemble the daemon of
// internal/daemon/app from it.
package runcli
