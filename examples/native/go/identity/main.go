// Command identity is a native streamd transform that passes every record
// through unchanged: the baseline for the cost of a native plugin call
// (docs/benchmarks.md). By default it answers KEEP, so records are not sent
// back; with config { copy = true } it sends each record back as a new output
// record, as the Go Wasm identity example does.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/sdk/go/native"
)

func main() {
	var cfg struct {
		Copy bool `json:"copy"`
	}
	native.Serve(native.Plugin{
		Name:    "identity",
		Version: "1.0.0",
		Init: func(_ context.Context, raw json.RawMessage) error {
			if err := json.Unmarshal(raw, &cfg); err != nil {
				return fmt.Errorf("config: %w", err)
			}
			return nil
		},
		Transformer: native.TransformFunc(func(_ context.Context, r record.Record) native.Result {
			if cfg.Copy {
				return native.Result{Records: []record.Record{r}}
			}
			return native.Result{Keep: true}
		}),
	})
}
