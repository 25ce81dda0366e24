package plugins

import "time"

// Defaults for the zero values of [Options], the same for every loader.
const (
	// DefaultTimeout bounds one call into a plugin when Options.Timeout is
	// 0, for Wasm and native plugins alike.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxMemoryPages caps a Wasm instance's memory when
	// Options.MaxMemoryPages is 0: 256 pages of 64 KiB, 16 MiB.
	DefaultMaxMemoryPages = 256
	// DefaultMaxTableElements caps each table of a Wasm instance when
	// WasmOptions.MaxTableElements is 0: 1,048,576 elements of 8 bytes, 8
	// MiB. Toolchains need far fewer (a small Go plugin's table has about
	// 5,500 elements, a large Go program's tens of thousands; C, Rust and
	// AssemblyScript ones have tens).
	DefaultMaxTableElements = 1 << 20
	// DefaultMaxModuleBytes caps the size of a Wasm module file when
	// WasmOptions.MaxModuleBytes is 0: 64 MiB (a Go plugin is 2 MB and up).
	DefaultMaxModuleBytes = 64 << 20
	// DefaultCompileTimeout bounds compiling a Wasm module when
	// WasmOptions.CompileTimeout is 0 (a 2 MB Go plugin compiles in about
	// a second).
	DefaultCompileTimeout = time.Minute
	// DefaultMaxLogLineBytes caps one line a Wasm guest logs (a log call,
	// or a line of its stdout or stderr) when WasmOptions.MaxLogLineBytes
	// is 0: 4 KiB; the rest of the line is dropped.
	DefaultMaxLogLineBytes = 4 << 10
	// DefaultMaxLogLinesPerRecord and DefaultMaxLogBytesPerRecord bound
	// what a Wasm guest logs in one call, per record of the call, when
	// the WasmOptions fields are 0: 16 lines and 16 KiB a record (a batch
	// of 1024 records may log 16,384 lines, 16 MiB). A call without
	// records (the manifest, init) counts as one record.
	DefaultMaxLogLinesPerRecord = 16
	DefaultMaxLogBytesPerRecord = 16 << 10
)
