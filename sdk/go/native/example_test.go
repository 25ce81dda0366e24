package native_test

import (
	"bytes"
	"context"
	"errors"

	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/sdk/go/native"
)

// A whole native transform plugin: upper-case every value, reject empty ones.
// Build it with `go build -o plugin .` and name it in a pipeline as
// plugin = "native:./plugin".
func ExampleServe() {
	native.Serve(native.Plugin{
		Name:    "upper",
		Version: "1.0.0",
		Transformer: native.TransformFunc(func(_ context.Context, r record.Record) native.Result {
			if len(r.Value) == 0 {
				return native.Result{Err: errors.New("empty value")}
			}
			r.Value = bytes.ToUpper(r.Value)
			return native.Result{Records: []record.Record{r}}
		}),
	})
}

// Logger's lines reach streamd's log at their level, tagged with the plugin.
func ExampleLogger() {
	log := native.Logger()
	log.Info("connected", "table", "orders")
}
