// Package pluginv1 is the generated Go code of the streamd native plugin
// protocol, version 1 (plugin.proto in this directory). Regenerate it with
// scripts/gen-proto; do not edit the .pb.go files by hand.
//
// Plugin authors use sdk/go/native rather than this package; the host side
// is plugins/native.
package pluginv1
