package plugins

import (
	"context"
	"time"

	"github.com/streamd/streamd/record"
)

// Kind names what a plugin does.
type Kind string

// The plugin kinds.
const (
	KindTransform Kind = "transform"
	KindCodec     Kind = "codec"
	KindSink      Kind = "sink"
)

// Manifest is what a plugin says about itself at load.
type Manifest struct {
	Name    string `json:"name"`
	Kind    Kind   `json:"kind"`
	Version string `json:"version"`
	// ABI is the host ABI (Wasm) or protocol (native) version it speaks.
	ABI int `json:"abi"`
}

// Plugin is a loaded plugin of any kind.
type Plugin interface {
	Manifest() Manifest
	// Close releases the plugin; ctx bounds how long it may take.
	Close(ctx context.Context) error
}

// OpenFunc loads the plugin named by ref (for plugins/load "wasm:PATH",
// "PATH.wasm" or "native:PATH"; for a loader, the path) with opts. The
// result implements the interface of its kind. plugins/load.Open,
// plugins/wasm.Open and plugins/native.Open are OpenFuncs; whatever loads
// plugins for streamd (the daemon, its commands, fluid, journal) takes one.
type OpenFunc func(ctx context.Context, ref string, opts Options) (Plugin, error)

// Result is what a transform made of one input record: zero or more output
// records, or a per-record error (the record goes to the error policy).
type Result struct {
	Records []record.Record
	Err     error
	// Outputs, when not nil, names the output each of Records goes to
	// (Outputs[i] for Records[i]; "" is the stage's default output), for
	// transforms that choose outputs by name (a Redpanda data transform
	// writing to a topic): only names of Options.Wasm.Outputs. Nil: every
	// record goes to the default output.
	Outputs []string
}

// Transformer turns a batch of records into one Result per input, in order.
// A non-nil error fails the whole batch (a trap, a timeout, a crash): the
// caller may retry the records one by one to isolate a poison record.
type Transformer interface {
	Transform(ctx context.Context, batch []record.Record) ([]Result, error)
}

// TransformerFunc is a function that is a Transformer.
type TransformerFunc func(ctx context.Context, batch []record.Record) ([]Result, error)

// Transform calls f.
func (f TransformerFunc) Transform(ctx context.Context, batch []record.Record) ([]Result, error) {
	return f(ctx, batch)
}

// Payload is a codec's output for one input payload, or a per-payload error.
type Payload struct {
	Data []byte
	Err  error
}

// Codec encodes and decodes byte payloads, a batch at a time. The returned
// slice has one Payload per input, in order.
type Codec interface {
	Encode(ctx context.Context, payloads [][]byte) ([]Payload, error)
	Decode(ctx context.Context, payloads [][]byte) ([]Payload, error)
}

// Sink writes a batch and reports, per record, whether it was durably
// written: errs has one entry per input, nil where the record is durable.
// A non-nil error fails the whole batch (nothing is known to be durable).
type Sink interface {
	Write(ctx context.Context, batch []record.Record) (errs []error, err error)
}

// SinkFunc is a function that is a Sink.
type SinkFunc func(ctx context.Context, batch []record.Record) (errs []error, err error)

// Write calls f.
func (f SinkFunc) Write(ctx context.Context, batch []record.Record) ([]error, error) {
	return f(ctx, batch)
}

// The optional interfaces: a plugin (or a stage or sink built on one) may
// implement these beside its kind's, and the pipeline, the daemon and the
// console look for them with a type assertion. Each is named for its
// method, with -er.

// Healther is implemented by what can be in a failed state between calls
// (a native plugin whose process crashed and is being restarted): Health
// returns nil when healthy. The pipeline reports it in Status and /readyz.
type Healther interface {
	Health() error
}

// Reloader is implemented by plugins that can load a new version of
// themselves while running (Wasm plugins opened with a Watch): Reload
// loads the file now and swaps the new version in between batches (a
// version that fails to load leaves the old one in place); Reloads says
// how many times a new version was swapped in.
type Reloader interface {
	Reload(ctx context.Context) error
	Reloads() int64
}

// ReloadReporter is implemented by Reloaders that keep their last refused
// reload: ReloadRefused returns it while the plugin's file holds a version
// that was refused (it did not load, or is another plugin) and the old
// version runs on; nil once a version is swapped in or the file is back
// to the running one.
type ReloadReporter interface {
	ReloadRefused() *ReloadRefusal
}

// ReloadRefusal is a refused hot reload: why, and when it was last tried.
type ReloadRefusal struct {
	Err error
	At  time.Time
}
