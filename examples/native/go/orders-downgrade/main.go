// Command orders-downgrade is the orders-v2 -> orders-v1 downgrade as a
// native streamd plugin (a transform over gRPC). Build it with ./build.sh and
// name it in a pipeline as plugin = "native:examples/native/go/orders-downgrade/plugin".
//
// The downgrade itself is the pure Go package shared with the Wasm example
// (examples/wasm/go/orders-downgrade/downgrade); the rules are in
// examples/wasm/testdata/README.md and the conformance fixture next to it.
package main

import (
	"context"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/sdk/go/native"
)

func main() {
	native.Serve(native.Plugin{
		Name:        "orders-downgrade",
		Version:     "1.0.0",
		Transformer: native.TransformFunc(transform),
	})
}

// transform downgrades one record's value and marks it as schema version 1.
func transform(_ context.Context, r record.Record) native.Result {
	v, err := downgrade.Value(nil, r.Value)
	if err != nil {
		return native.Result{Err: err}
	}
	r.Value = v
	r.SetHeader(downgrade.SchemaHeader, []byte("1"))
	return native.Result{Records: []record.Record{r}}
}
