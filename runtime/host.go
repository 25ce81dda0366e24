package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/runtime/internal/fuel"
	wire "github.com/streamd/streamd/sdk/go/streamd/abi"
)

// Defaults for the zero values of plugins.Options.
const (
	// DefaultMaxMemoryPages caps an instance at 16 MiB
	// (plugins.DefaultMaxMemoryPages).
	DefaultMaxMemoryPages = plugins.DefaultMaxMemoryPages
	// DefaultTimeout bounds one call into a guest when
	// plugins.Options.Timeout is 0 (plugins.DefaultTimeout, 5s). A negative
	// Timeout means no timeout: the guest is compiled without fuel checks
	// (0-25% faster, see docs/benchmarks.md) and neither a timeout nor a
	// cancelled context can stop a call in progress. Use it only for
	// trusted plugins.
	DefaultTimeout = plugins.DefaultTimeout
	// DefaultMaxTableElements caps each table of an instance
	// (plugins.DefaultMaxTableElements, 8 MiB).
	DefaultMaxTableElements = plugins.DefaultMaxTableElements
	// DefaultMaxModuleBytes caps a module file (plugins.DefaultMaxModuleBytes).
	DefaultMaxModuleBytes = plugins.DefaultMaxModuleBytes
	// DefaultCompileTimeout bounds a module's compile
	// (plugins.DefaultCompileTimeout).
	DefaultCompileTimeout = plugins.DefaultCompileTimeout
)

// NewestABI is the newest host ABI version this host speaks; it also speaks
// every older one.
const NewestABI = 1

// Op says what a guest does with a batch (docs/abi.md section 7).
type Op uint32

// The ops of ABI v1.
const (
	OpTransform = Op(wire.OpTransform)
	OpEncode    = Op(wire.OpEncode)
	OpDecode    = Op(wire.OpDecode)
	OpWrite     = Op(wire.OpWrite)
)

func (o Op) String() string {
	switch o {
	case OpTransform:
		return "TRANSFORM"
	case OpEncode:
		return "ENCODE"
	case OpDecode:
		return "DECODE"
	case OpWrite:
		return "WRITE"
	}
	return "op " + strconv.Itoa(int(o))
}

// ErrNotPlugin is wrapped by load errors for a file that is not a streamd
// Wasm plugin (not Wasm, no or unsupported ABI marker, missing exports).
var ErrNotPlugin = errors.New("not a streamd plugin")

// notPluginError is an ErrNotPlugin with a message of its own.
type notPluginError struct{ msg string }

func (e *notPluginError) Error() string { return e.msg }
func (e *notPluginError) Unwrap() error { return ErrNotPlugin }

// Host loads Wasm plugins. It is safe for concurrent use.
type Host struct {
	mu     sync.Mutex
	caches map[string]wazero.CompilationCache // by directory
	// rewrite is fuel.Rewrite when nil; tests give a rewriter that cannot
	// read a module (export_test.go).
	rewrite func(bin []byte, o fuel.Options) ([]byte, error)
	// raw loads modules that are not plugins: no ABI checks, no manifest
	// or init (tests only: the generative test runs random modules
	// through the sandbox, export_test.go).
	raw bool
}

// NewHost returns a Host. Close it to release the compilation caches.
func NewHost(_ context.Context) (*Host, error) {
	return &Host{caches: map[string]wazero.CompilationCache{}}, nil
}

// Close releases the compilation caches. Modules must be closed first.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for dir, c := range h.caches {
		errs = append(errs, c.Close(ctx))
		delete(h.caches, dir)
	}
	return errors.Join(errs...)
}

func (h *Host) cache(dir string) (wazero.CompilationCache, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.caches[dir]; ok {
		return c, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wasm cache dir: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wasm cache dir %s: %w", dir, err)
	}
	h.caches[dir] = c
	return c, nil
}

// Load reads, checks, compiles and instantiates the plugin at path, calls its
// manifest and init, and returns the Module. opts.Kind, when set, must match
// the manifest's kind.
func (h *Host) Load(ctx context.Context, path string, opts plugins.Options) (*Module, error) {
	bin, err := readModule(path, opts)
	if err != nil {
		return nil, err
	}
	return h.load(ctx, path, bin, opts)
}

// readModule reads the module file at path, refusing one larger than
// max_module_bytes without reading all of it.
func readModule(path string, opts plugins.Options) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	limit := maxModuleBytes(opts)
	// Read one byte more than the limit allows, so that a file over it
	// is told from one at it.
	bin, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(bin)) > limit {
		size := int64(len(bin))
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		return nil, fmt.Errorf("%s: the module is %s, more than max_module_bytes = %d (%s) allows",
			path, bytesText(uint64(size)), limit, bytesText(uint64(limit)))
	}
	return bin, nil
}

func maxModuleBytes(opts plugins.Options) int64 {
	if opts.Wasm.MaxModuleBytes > 0 {
		return opts.Wasm.MaxModuleBytes
	}
	return DefaultMaxModuleBytes
}

// tableRequest is the export under which an instrumented module holds the
// table size a refused table.grow asked for (fuel.Options.TableRequest).
const tableRequest = "streamd.$table_request"

func (h *Host) load(ctx context.Context, path string, bin []byte, opts plugins.Options) (*Module, error) {
	name := path
	if !bytes.HasPrefix(bin, []byte("\x00asm")) {
		return nil, fmt.Errorf("%s: %w: not a WebAssembly module", name, ErrNotPlugin)
	}
	if limit := maxModuleBytes(opts); int64(len(bin)) > limit {
		return nil, fmt.Errorf("%s: the module is %s, more than max_module_bytes = %d (%s) allows",
			name, bytesText(uint64(len(bin))), limit, bytesText(uint64(limit)))
	}
	maxPages := opts.Wasm.MaxMemoryPages
	if maxPages == 0 {
		maxPages = DefaultMaxMemoryPages
	}
	if maxPages > 65536 {
		return nil, fmt.Errorf("%s: max memory pages %d exceeds 65536 (4 GiB)", name, maxPages)
	}
	maxTable := opts.Wasm.MaxTableElements
	if maxTable == 0 {
		maxTable = DefaultMaxTableElements
	}
	logger := discardLogger(opts.Logger).With("plugin", name)
	sum := sha256.Sum256(bin)
	code, fueled, err := h.prepare(bin, sum, opts, maxTable, logger)
	var tle *fuel.TableLimitError
	switch {
	case errors.As(err, &tle):
		return nil, fmt.Errorf("%s: %w: table %d starts with %d elements (%s), more than %s; raise max_table_elements, or make the module start smaller",
			name, plugins.ErrMemoryLimit, tle.Table, tle.Min, bytesText(tle.Min*8), tableLimitText(maxTable))
	case errors.Is(err, fuel.ErrTooComplex):
		return nil, fmt.Errorf("%s: refused: %w", name, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w: not a valid WebAssembly module: %w", name, ErrNotPlugin, err)
	}
	// wazero's own memory limit is the most Wasm allows: the cap is
	// enforced by each instance's memory (guestMemory), which so learns
	// that a growth was refused and why, and the initial memory is checked
	// here, so that either names max_memory_pages.
	rc := wazero.NewRuntimeConfigCompiler().
		WithMemoryLimitPages(65536).
		WithCloseOnContextDone(opts.Timeout >= 0 && !fueled)
	compileTimeout := opts.Wasm.CompileTimeout
	if compileTimeout <= 0 {
		compileTimeout = DefaultCompileTimeout
	}
	rt, cm, err := h.compileWithin(ctx, rc, code, opts.Wasm.CacheDir, compileTimeout, logger)
	if err != nil {
		if errors.Is(err, errCompileTimeout) {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return nil, fmt.Errorf("%s: %w: not a valid WebAssembly module: %w", name, ErrNotPlugin, err)
	}
	for _, mem := range cm.ExportedMemories() {
		if mem.Min() > maxPages {
			_ = rt.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("%s: %w: the module's initial memory is %s, more than %s; raise max_memory_pages, or make the module start smaller",
				name, plugins.ErrMemoryLimit, pagesText(mem.Min()), limitText(maxPages))
		}
	}
	m, err := newModule(ctx, rt, name, cm, fueled, maxPages, maxTable, h.raw, opts)
	if err != nil {
		_ = rt.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	m.path = path
	m.sum = sum
	return m, nil
}

// prepare returns the code to compile for bin, and whether it is
// instrumented with fuel checks. So that a timeout or a cancelled context
// can stop guest code, the module is instrumented (runtime/internal/fuel):
// every fuelRefill units of work (function entries, loop iterations and
// code between them, bytes of bulk memory and table instructions) it calls
// the host, which stops it when the call is over time. The rewrite also
// checks every index the module names and caps its tables
// (max_table_elements). wazero's own WithCloseOnContextDone, which leaves
// native code at every loop back edge (2-10x slower guest code,
// docs/benchmarks.md), is the fallback for a module whose encoding the
// instrumentation does not know (its tables are still capped). A negative
// Timeout turns both off for a trusted plugin, which then cannot be
// stopped.
func (h *Host) prepare(bin []byte, sum [32]byte, opts plugins.Options, maxTable uint32, logger *slog.Logger) ([]byte, bool, error) {
	if opts.Timeout >= 0 {
		code, err := h.instrument(bin, sum, opts.Wasm.CacheDir, maxTable, logger)
		if err == nil {
			return code, true, nil
		}
		if !errors.Is(err, fuel.ErrUnsupported) {
			return nil, false, err
		}
		// A valid module the rewriter cannot read still runs, and a
		// timeout still stops it, but its code is 2-10x slower: say so.
		logger.Warn("wasm fuel instrumentation cannot read the module; it runs with wazero's slower timeout checks", "err", err)
	}
	code, err := fuel.LimitTables(bin, maxTable)
	return code, false, err
}

// errCompileTimeout is wrapped by the error of a compile that ran past its
// deadline (compileWithin).
var errCompileTimeout = errors.New("compile timed out")

// compileWithin is compile under a deadline: a compile still running
// after timeout (or when ctx ends) is abandoned and its error names
// compile_timeout. wazero stops an abandoned compile before its next
// function (it compiles with two or more workers, which look at the
// context); a function it has started runs to its end in the background,
// bounded by the rewrite's structure limits (fuel.MaxDepth,
// fuel.MaxBrTableTargets) to a second or two, and its runtime is then
// closed.
func (h *Host) compileWithin(ctx context.Context, rc wazero.RuntimeConfig, code []byte, cacheDir string, timeout time.Duration, logger *slog.Logger) (wazero.Runtime, wazero.CompiledModule, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cctx = experimental.WithCompilationWorkers(cctx, max(2, min(goruntime.GOMAXPROCS(0), 4)))
	type result struct {
		rt  wazero.Runtime
		cm  wazero.CompiledModule
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		rt, cm, err := h.compile(cctx, rc, code, cacheDir, logger)
		done <- result{rt, cm, err}
	}()
	select {
	case r := <-done:
		cancel()
		if r.err != nil && cctx.Err() != nil && ctx.Err() == nil {
			// The deadline came as the compile gave up.
			return nil, nil, fmt.Errorf("%w: compiling took longer than compile_timeout = %v", errCompileTimeout, timeout)
		}
		return r.rt, r.cm, r.err
	case <-cctx.Done():
	}
	cancel()
	go func() {
		r := <-done
		if r.rt != nil {
			_ = r.rt.Close(context.Background())
		}
		logger.Warn("abandoned wasm compile ended", "after", time.Since(start).Round(time.Millisecond))
	}()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return nil, nil, fmt.Errorf("%w: compiling took longer than compile_timeout = %v", errCompileTimeout, timeout)
}

// compile makes the module's runtime and compiles code in it, with the
// compile cache in cacheDir when there is one. The cache only saves time:
// when it fails (a full disk, an unwritable or damaged cache), code is
// compiled again without it and the failure logged, so that a cache
// problem never stops a plugin or passes for a broken module.
func (h *Host) compile(ctx context.Context, rc wazero.RuntimeConfig, code []byte, cacheDir string, logger *slog.Logger) (wazero.Runtime, wazero.CompiledModule, error) {
	if cacheDir != "" {
		c, err := h.cache(cacheDir)
		if err == nil {
			rt := wazero.NewRuntimeWithConfig(ctx, rc.WithCompilationCache(c))
			cm, err := compileModule(ctx, rt, code)
			if err == nil {
				return rt, cm, nil
			}
			_ = rt.Close(context.WithoutCancel(ctx))
			// Either the cache failed or the module is invalid: without
			// the cache, an invalid module fails again, and that error
			// is the one to report.
			rt, cm, err2 := compileNoCache(ctx, rc, code)
			if err2 != nil {
				return nil, nil, err2
			}
			logger.Warn("wasm compile cache failed; running without it", "cache_dir", cacheDir, "err", err)
			return rt, cm, nil
		}
		logger.Warn("wasm compile cache failed; running without it", "cache_dir", cacheDir, "err", err)
	}
	return compileNoCache(ctx, rc, code)
}

func compileNoCache(ctx context.Context, rc wazero.RuntimeConfig, code []byte) (wazero.Runtime, wazero.CompiledModule, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	cm, err := compileModule(ctx, rt, code)
	if err != nil {
		_ = rt.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	return rt, cm, nil
}

// instrument returns bin with fuel checks (runtime/internal/fuel), or bin
// and why the instrumentation cannot read it. With a cache
// directory, the instrumented copy is kept there under the original's
// SHA-256, so that a restart does not rewrite it again (~15 ms for a 2 MB
// Go plugin).
func (h *Host) instrument(bin []byte, sum [32]byte, cacheDir string, maxTable uint32, logger *slog.Logger) ([]byte, error) {
	var cached string
	if cacheDir != "" {
		cached = filepath.Join(cacheDir, "fuel", fmt.Sprintf("v%d-%d-t%d-%x.wasm", fuel.Version, fuelRefill, maxTable, sum))
		// The file ends with the CRC-32C of what precedes it: a torn or
		// damaged copy is rewritten, never compiled. (Its name already
		// carries a cryptographic hash of the input; this only checks
		// the write, at ~10 GB/s instead of SHA-256's ~1.5.)
		if b, err := os.ReadFile(cached); err == nil && len(b) > 4 {
			code, tail := b[:len(b)-4], b[len(b)-4:]
			if crc32.Checksum(code, castagnoli) == binary.LittleEndian.Uint32(tail) {
				return code, nil
			}
		}
	}
	rewrite := h.rewrite
	if rewrite == nil {
		rewrite = fuel.Rewrite
	}
	out, err := rewrite(bin, fuel.Options{Module: "streamd", Name: fuelImport, Fuel: fuelRefill,
		MaxTableElements: maxTable, TableRequest: tableRequest})
	if err != nil {
		return bin, err
	}
	if cached != "" { // best effort: a failure only costs the next start time
		if err := keep(cached, out); err != nil {
			logger.Warn("wasm cache: could not keep the fuel-instrumented copy; it is rewritten at the next start", "path", cached, "err", err)
		}
	}
	return out, nil
}

// keep writes code and its CRC-32C to path, through a temporary file that
// is renamed into place, so that a reader sees all of it or nothing.
func keep(path string, code []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	file := binary.LittleEndian.AppendUint32(code[:len(code):len(code)], crc32.Checksum(code, castagnoli))
	err := os.WriteFile(tmp, file, 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// exports checks a compiled module's exports and imports against ABI v1.
func checkExports(name string, cm wazero.CompiledModule, fueled bool) (int, error) {
	fns := cm.ExportedFunctions()
	var versions []int
	for export := range fns {
		if v, ok := strings.CutPrefix(export, "streamd_abi_v"); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || strconv.Itoa(n) != v {
				return 0, fmt.Errorf("%s: %w: bad ABI marker export %q", name, ErrNotPlugin, export)
			}
			versions = append(versions, n)
		}
	}
	switch {
	case len(versions) == 0:
		return 0, missingExport(name, "streamd_abi_vN", cm)
	case len(versions) > 1:
		slices.Sort(versions)
		return 0, fmt.Errorf("%s: %w: several ABI marker exports (versions %v), want exactly one", name, ErrNotPlugin, versions)
	case versions[0] > NewestABI:
		return 0, &notPluginError{fmt.Sprintf("%s: plugin needs ABI v%d, this streamd supports ABI v%d at most", name, versions[0], NewestABI)}
	case versions[0] < 1:
		return 0, fmt.Errorf("%s: %w: ABI v%d does not exist", name, ErrNotPlugin, versions[0])
	}
	i32 := api.ValueTypeI32
	want := []struct {
		name            string
		params, results []api.ValueType
	}{
		{"streamd_buffer", []api.ValueType{i32}, []api.ValueType{i32}},
		{"streamd_manifest", nil, []api.ValueType{i32}},
		{"streamd_init", []api.ValueType{i32}, []api.ValueType{i32}},
		{"streamd_process", []api.ValueType{i32}, []api.ValueType{i32}},
	}
	for _, w := range want {
		fn, ok := fns[w.name]
		if !ok {
			return 0, missingExport(name, w.name, cm)
		}
		if !slices.Equal(fn.ParamTypes(), w.params) || !slices.Equal(fn.ResultTypes(), w.results) {
			return 0, fmt.Errorf("%s: export %s has signature %s, want %s", name, w.name,
				signature(fn.ParamTypes(), fn.ResultTypes()), signature(w.params, w.results))
		}
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		return 0, missingExport(name, "memory", cm)
	}
	if fn, ok := fns["_initialize"]; ok && (len(fn.ParamTypes()) != 0 || len(fn.ResultTypes()) != 0) {
		return 0, fmt.Errorf("%s: export _initialize has signature %s, want () -> ()", name,
			signature(fn.ParamTypes(), fn.ResultTypes()))
	}
	for _, fn := range cm.ImportedFunctions() {
		mod, imp, _ := fn.Import()
		switch mod {
		case "streamd":
			if imp != "reply" && imp != "log" && (imp != fuelImport || !fueled) {
				return 0, fmt.Errorf("%s: imports streamd.%s, which ABI v1 does not provide", name, imp)
			}
		case wasi_snapshot_preview1.ModuleName:
		default:
			return 0, fmt.Errorf("%s: imports %s.%s; a plugin may import only module streamd and %s",
				name, mod, imp, wasi_snapshot_preview1.ModuleName)
		}
	}
	return versions[0], nil
}

// missingExport is the error for a module without streamd's export want:
// it lists the functions and memories the module does export (a toolchain
// that exports nothing by default, such as Zig without -rdynamic, shows
// there) and points to the docs of building a plugin without an SDK.
func missingExport(name, want string, cm wazero.CompiledModule) error {
	var have []string
	for e := range cm.ExportedFunctions() {
		have = append(have, e)
	}
	for e := range cm.ExportedMemories() {
		have = append(have, e)
	}
	slices.Sort(have)
	list := "nothing"
	if len(have) > 0 {
		if len(have) > 12 {
			have = append(have[:12], fmt.Sprintf("and %d more", len(have)-12))
		}
		list = strings.Join(have, ", ")
	}
	return fmt.Errorf("%s: %w: missing export %s (the module exports: %s); docs/plugins.md, \"A language without an SDK\", says what a plugin exports and how to build one",
		name, ErrNotPlugin, want, list)
}

func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return names(params) + " -> " + names(results)
}

// parseManifest parses and checks a manifest reply.
func parseManifest(name string, version int, b []byte) (plugins.Manifest, error) {
	var m plugins.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: manifest is not valid JSON: %w", name, err)
	}
	if !validName(m.Name) {
		return m, fmt.Errorf("%s: manifest name %q must match [a-z0-9._-]{1,64}", name, m.Name)
	}
	switch m.Kind {
	case plugins.KindTransform, plugins.KindCodec, plugins.KindSink:
	default:
		return m, fmt.Errorf("%s: manifest kind %q must be transform, codec or sink", name, m.Kind)
	}
	if m.ABI != version {
		return m, fmt.Errorf("%s: manifest says abi %d but the module exports streamd_abi_v%d", name, m.ABI, version)
	}
	return m, nil
}

func validName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// pagesText says how much n pages of Wasm memory are: "300 pages (18.8 MiB)".
func pagesText(n uint32) string {
	unit := "pages"
	if n == 1 {
		unit = "page"
	}
	return fmt.Sprintf("%d %s (%s)", n, unit, bytesText(uint64(n)*65536))
}

// tableLimitText names a table cap: "max_table_elements = 1048576 (8 MiB)".
func tableLimitText(n uint32) string {
	return fmt.Sprintf("max_table_elements = %d (%s)", n, bytesText(uint64(n)*8))
}

// limitText names a memory cap: "max_memory_pages = 256 (16 MiB)".
func limitText(n uint32) string {
	return fmt.Sprintf("max_memory_pages = %d (%s)", n, bytesText(uint64(n)*65536))
}

// bytesText writes b in KiB, MiB or GiB with at most one decimal.
func bytesText(b uint64) string {
	f, unit := float64(b)/(1<<10), "KiB"
	switch {
	case b >= 1<<30:
		f, unit = float64(b)/(1<<30), "GiB"
	case b >= 1<<20:
		f, unit = float64(b)/(1<<20), "MiB"
	}
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0") + " " + unit
}

func poolSize(n int) int {
	if n > 0 {
		return n
	}
	return goruntime.GOMAXPROCS(0)
}

func discardLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
