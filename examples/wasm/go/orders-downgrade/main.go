// Command orders-downgrade is a streamd Wasm transform plugin written with
// the Go SDK: it downgrades orders-v2 JSON values to the orders-v1 shape and
// sets the fluid-schema-version header to 1 (rules in
// examples/wasm/testdata/README.md). Build it with build.sh.
package main

import (
	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/sdk/go/streamd"
)

func main() {}

// v1 is the header value; a []byte("1") in the function would allocate
// for every record, and allocation is slow in a Go Wasm guest.
var v1 = []byte("1")

func init() {
	var buf []byte
	streamd.Transform(streamd.Manifest{Name: "orders-downgrade", Version: "1.0.0"},
		func(r *streamd.Record) ([]streamd.Record, error) {
			v, err := downgrade.Value(buf[:0], r.Value)
			if err != nil {
				return nil, err
			}
			buf = v
			out := *r
			out.Value = v
			out.SetHeader(downgrade.SchemaHeader, v1)
			return streamd.One(out), nil
		})
}
