// Package initcli is `streamd init`: a starter folder (a config with an
// embedded broker, a generator, a pipeline through a Wasm plugin, its test
// and a README) written from the files embedded in the binary.
package initcli
