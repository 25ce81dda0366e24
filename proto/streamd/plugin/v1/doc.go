// Package pluginv1 is the generated Go code of the streamd native plugin
// protocol, version 1 (plugin.proto in this directory). Regenerate it with
// scripts/gen-proto; do not edit the .pb.go files by hand.
//
// It also holds the go-plugin glue both ends share (Handshake, GRPCPlugin)
// and the record conversions (wire.go), so the host (plugins/native) and the
// Go SDK (sdk/go/native) depend on this package, not on each other. Plugin
// authors use sdk/go/native rather than this package.
package pluginv1
