// Package testcli is `streamd test FILE.toml...`: each [[pipeline.test]]
// fixture of a config run through its pipeline's stages and error policy,
// with no broker, its output compared with the expected file.
package testcli
