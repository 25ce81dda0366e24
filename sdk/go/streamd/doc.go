// Package streamd is the Go SDK for streamd WebAssembly plugins (host ABI
// v1, docs/abi.md). A plugin is a Go main package built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// that registers its one function in init:
//
//	func main() {}
//
//	func init() {
//		streamd.Transform(streamd.Manifest{Name: "upper", Version: "1.0.0"},
//			func(r *streamd.Record) ([]streamd.Record, error) {
//				r.Value = bytes.ToUpper(r.Value)
//				return streamd.One(*r), nil
//			})
//	}
//
// The SDK exports the ABI functions, owns the growable input buffer and does
// the batch encoding: a plugin sees one record at a time. Returning an error
// rejects that record (ERR_RECORD); wrapping it with BatchError fails the
// whole batch instead. Returning KeepRecord passes the input on unchanged
// without copying it back to the host.
//
// Records handed to a plugin function point into the SDK's input buffer and
// are valid only during the call: copy what you keep. The records a
// function returns are encoded as soon as it returns, so their bytes may
// live in a buffer the function reuses on its next call. Allocation is
// expensive in a Go guest: One and Record.SetHeader use storage the SDK
// reuses, so a one-record transform need not allocate per record.
//
// Off wasip1 (tests on the host) the package builds too, without the
// exports, and Init and Process run the registered plugin's init and a
// request batch.
//
// The SDK is a Go module of its own, github.com/streamd/streamd/sdk/go/streamd,
// with no dependencies: a plugin's go.mod requires it (with a replace
// directive pointing at a streamd checkout's sdk/go/streamd, as
// `streamd plugin new --lang go` writes). Package streamdjson decodes the
// plugin's config and JSON values strictly.
package streamd
