// Command identity is a streamd Wasm transform plugin written with the Go
// SDK that returns a copy of every record: the benchmark baseline for the
// cost of a Go guest. Its manifest is every language's identity's
// (examples/wasm/*/identity): transform "identity" 1.0.0, which the shared
// guest conformance suite checks. Build it with build.sh.
package main

import "github.com/streamd/streamd/sdk/go/streamd"

func main() {}

func init() {
	streamd.Transform(streamd.Manifest{Name: "identity", Version: "1.0.0"},
		func(r *streamd.Record) ([]streamd.Record, error) {
			return streamd.One(*r), nil
		})
}
