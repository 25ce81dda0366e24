// Package native is the Go SDK for streamd native plugins: executables that
// streamd starts and talks to over gRPC (hashicorp/go-plugin), named in a
// pipeline as plugin = "native:./path/to/binary".
//
// A plugin is a main that describes itself and calls Serve:
//
//	func main() {
//		native.Serve(native.Plugin{
//			Name:    "upper",
//			Version: "1.0.0",
//			Transformer: native.TransformFunc(func(ctx context.Context, r record.Record) native.Result {
//				r.Value = bytes.ToUpper(r.Value)
//				return native.Result{Records: []record.Record{r}}
//			}),
//		})
//	}
//
// Exactly one of Transformer, Codec or Sink is set; it decides the plugin's
// kind. streamd calls it one batch at a time (calls never overlap) and
// restarts the process if it dies, retrying the batch in flight, so a sink
// must make each Write durable before returning and should be idempotent.
// The wire protocol is in proto/streamd/plugin/v1 and docs/native-plugins.md.
package native
