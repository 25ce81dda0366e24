package plugins

import "errors"

// ErrRecordTooLarge is wrapped by a sink's per-record error when the record
// is over a size limit of the sink or of what is behind it (a Kafka
// broker's max.message.bytes). The pipeline's dead-letter queue then
// receives the record without its value (and, if still too large, without
// its key and its own headers), so that the error can be recorded.
var ErrRecordTooLarge = errors.New("record too large")

// Kinds of whole-call failure, wrapped by the error a loader returns when a
// call into a plugin fails as a whole, so that callers (the pipeline,
// `streamd plugin test`) can tell a crash from a hang from a limit without
// reading messages. A record the plugin rejects is none of these: it is a
// per-record error (Result.Err, Payload.Err, a Sink's errs).
var (
	// ErrTimeout: the call ran past Options.Timeout and was stopped.
	ErrTimeout = errors.New("plugin call timed out")
	// ErrMemoryLimit: the plugin needed more memory than its limit allows
	// (a Wasm guest's max_memory_pages, Options.MaxMemoryPages): a memory
	// growth was refused during the call, or the module's initial memory
	// is over the limit (at load).
	ErrMemoryLimit = errors.New("memory limit reached")
	// ErrTrap: the plugin crashed: a Wasm trap (unreachable, a panic, an
	// out-of-bounds access, a stack overflow, an exit), or a native
	// plugin's process that died during the call.
	ErrTrap = errors.New("plugin crashed")
)
