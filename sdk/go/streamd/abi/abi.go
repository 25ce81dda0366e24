// Package abi holds the numbers of streamd's Wasm host ABI v1 (docs/abi.md
// sections 7 and 8): the ops, the call statuses and the result entries'
// codes. It imports nothing, so the host (runtime/internal/abi) and the Go
// guest SDK (package streamd) take them from this one place.
package abi

// Op says what a guest does with a request batch.
type Op uint32

// The ops of ABI v1.
const (
	OpTransform Op = 1
	OpEncode    Op = 2
	OpDecode    Op = 3
	OpWrite     Op = 4
)

// Call statuses returned by streamd_manifest, streamd_init and
// streamd_process.
const (
	StatusOK          = 0
	StatusBatch       = 2
	StatusUnsupported = 3
	StatusConfig      = 4
	StatusInternal    = 5
)

// Per-record entry statuses in a result batch, and the record count that
// means "keep the input record unchanged".
const (
	EntryOK     = 0
	EntryReject = 1
	Keep        = 0xFFFFFFFF
)

// Null is the length that marks a null key, value or header value.
const Null = 0xFFFFFFFF

// NoTimestamp is the timestamp_ms of a record without a timestamp.
const NoTimestamp = -1
