//go:build tools

// Package examples holds nothing to build: this file keeps Redpanda's Go
// SDK in go.mod and go.sum, for build.sh, which builds the SDK's own
// examples.
package examples

import _ "github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
