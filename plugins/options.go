package plugins

import (
	"context"
	"log/slog"
	"time"
)

// Options configure how a plugin is loaded: the settings every loader
// reads, then each loader's own in a type of its own (Wasm, Native). A
// loader reads the common settings and its own; the zero value of every
// field is its default.
type Options struct {
	// Kind is the kind the caller needs; a plugin of another kind is refused.
	// Empty accepts any kind.
	Kind Kind
	// Config is the plugin's own config table from TOML, passed to its init.
	Config map[string]any
	// Logger receives the plugin's log lines and stdout/stderr, tagged with
	// its name. Nil discards them.
	Logger *slog.Logger
	// Timeout bounds one call into the plugin (0: [DefaultTimeout]).
	// Negative: no timeout; a Wasm plugin is then trusted and compiled
	// without fuel checks (a little faster, but it cannot be stopped).
	Timeout time.Duration
	// Pool is how many calls may run in parallel: Wasm instances, or
	// native plugin processes (0: the loader's default).
	Pool int

	// Wasm holds what only the Wasm loader (plugins/wasm, runtime) reads.
	Wasm WasmOptions
	// Native holds what only the native loader (plugins/native) reads.
	Native NativeOptions
}

// WasmOptions are the Wasm loader's own settings.
type WasmOptions struct {
	// CacheDir holds compiled modules so a restart does not recompile.
	// Empty disables the disk cache.
	CacheDir string
	// MaxMemoryPages caps an instance's memory in 64 KiB pages
	// (0: [DefaultMaxMemoryPages]).
	MaxMemoryPages uint32
	// MaxTableElements caps each of an instance's tables, in elements of
	// 8 bytes (0: [DefaultMaxTableElements]): a table.grow past it returns
	// -1, and a module whose table starts larger does not load.
	MaxTableElements uint32
	// MaxModuleBytes caps the size of the module file
	// (0: [DefaultMaxModuleBytes]).
	MaxModuleBytes int64
	// CompileTimeout bounds compiling the module (0:
	// [DefaultCompileTimeout]).
	CompileTimeout time.Duration
	// MaxLogLineBytes caps one line the guest logs (0:
	// [DefaultMaxLogLineBytes]); MaxLogLinesPerRecord and
	// MaxLogBytesPerRecord bound what it logs in one call, per record of
	// the call (0: [DefaultMaxLogLinesPerRecord],
	// [DefaultMaxLogBytesPerRecord]). What is over is counted and dropped,
	// and one line at the end of the call says how much.
	MaxLogLineBytes      int
	MaxLogLinesPerRecord int
	MaxLogBytesPerRecord int
	// Dirs grants the guest access to host directories: guest path ->
	// host path, read-write, or read-only when the host path ends in ":ro"
	// (":rw" is also accepted). No path, link or rename leads the guest
	// outside a granted directory (docs/abi.md section 11). Nothing is
	// granted by default.
	Dirs map[string]string
	// Clock grants the guest the host's clocks: the real wall-clock and
	// monotonic time, and sleeps that sleep (a call still ends at Timeout).
	// Without it the guest's clocks are fake: the wall clock starts at
	// 2022-01-01T00:00:00Z and both advance 1 ms per reading; sleeps
	// return at once (docs/abi.md section 11).
	Clock bool
	// DeterministicRandom gives the guest the same fixed sequence of
	// "random" bytes in every instance and run, for reproducible tests,
	// instead of crypto/rand (the default).
	DeterministicRandom bool
	// Watch makes the plugin reload its file when it changes, checking
	// every Watch; the new module is swapped in between batches. 0 disables
	// watching (a reload can still be asked for, e.g. on SIGHUP).
	Watch time.Duration

	// What a module written for another host's ABI is told of the stage
	// it runs in (docs/plugins.md, "Bringing a Redpanda transform or
	// Fluvio SmartModule"); a streamd plugin reads none of it.

	// Input names what the stage reads: a Redpanda data transform's
	// REDPANDA_INPUT_TOPIC (empty: "input").
	Input string
	// Outputs names the outputs the stage's records may go to, the first
	// being the default one: a Redpanda data transform sees them as
	// REDPANDA_OUTPUT_TOPIC_0.. and writes to one by name, and a record
	// written to a name not listed here is rejected (a verdict on its input
	// record, naming it). Empty: one output, "output". Result.Outputs says
	// where each output record goes.
	Outputs []string
	// SchemaRegistry serves a module's schema registry imports (a Redpanda
	// data transform's redpanda_schema_registry); nil: none is configured,
	// and a module that imports them does not load.
	SchemaRegistry SchemaRegistry
}

// SchemaRegistry is a Confluent-compatible Schema Registry as a Wasm
// module's schema registry imports use it. An error marked Transient
// (the registry cannot be reached, or answers 5xx) fails the call so that
// the batch is retried; any other error is the registry's answer about
// what was asked (an unknown id, subject or version; an incompatible or
// invalid schema), which the guest is told of.
type SchemaRegistry interface {
	// SchemaByID returns the schema with a global id (its Subject and
	// Version are not set).
	SchemaByID(ctx context.Context, id int) (RegistrySchema, error)
	// SchemaByVersion returns a subject's version; version -1 is the
	// latest.
	SchemaByVersion(ctx context.Context, subject string, version int) (RegistrySchema, error)
	// CreateSchema registers s under subject, or finds it there, and
	// returns it with its ID (and Version, when the registry says it).
	CreateSchema(ctx context.Context, subject string, s RegistrySchema) (RegistrySchema, error)
}

// RegistrySchema is a schema in a Schema Registry.
type RegistrySchema struct {
	ID      int
	Subject string
	Version int
	// Type is AVRO, PROTOBUF or JSON.
	Type       string
	Schema     string
	References []RegistryReference
}

// RegistryReference is a schema's reference to a subject's version.
type RegistryReference struct {
	Name, Subject string
	Version       int
}

// NativeOptions are the native loader's own settings.
type NativeOptions struct {
	// Checksum is the SHA-256 (hex) the plugin binary must have; empty
	// skips the check.
	Checksum string
	// ShutdownTimeout bounds how long the plugin process may take to exit
	// before it is killed (0: the loader's default).
	ShutdownTimeout time.Duration
}
