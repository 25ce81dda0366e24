package plugins

import (
	"context"

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

// Result is what a transform made of one input record: zero or more output
// records, or a per-record error (the record goes to the error policy).
type Result struct {
	Records []record.Record
	Err     error
}

// Transformer turns a batch of records into one Result per input, in order.
// A non-nil error fails the whole batch (a trap, a timeout, a crash): the
// caller may retry the records one by one to isolate a poison record.
type Transformer interface {
	Transform(ctx context.Context, batch []record.Record) ([]Result, error)
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
