package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/streamd/streamd/internal/x/wait"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime/internal/abi"
	"github.com/streamd/streamd/runtime/internal/rootfs"
	wire "github.com/streamd/streamd/sdk/go/streamd/abi"
)

// ErrBatch is wrapped by every error that fails a whole batch: a trap, a
// timeout, a guest that ran out of memory, ERR_BATCH or ERR_INTERNAL from the
// guest, or a malformed reply. The caller may retry the records one by one.
var ErrBatch = errors.New("batch failed")

// ErrUnsupported is wrapped when the guest answers ERR_UNSUPPORTED: it does
// not serve that op.
var ErrUnsupported = errors.New("op not supported by the plugin")

// ErrClosed is returned by calls on a closed Module.
var ErrClosed = errors.New("plugin closed")

// RejectError is the per-record error of a record the guest rejected with
// ERR_RECORD.
type RejectError struct {
	Plugin string
	Reason string
}

func (e *RejectError) Error() string {
	if e.Reason == "" {
		return "rejected by plugin " + e.Plugin
	}
	return e.Reason
}

// Module is a loaded plugin: a compiled module and a pool of instances.
// It is safe for concurrent use.
type Module struct {
	name     string // file name, for errors until the manifest is known
	path     string
	sum      [32]byte
	manifest plugins.Manifest
	version  int
	abi      ABI      // what the module was written against
	foreign  *foreign // a module of another host's ABI: what it is given; nil for a streamd plugin
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	modCfg   wazero.ModuleConfig
	config   []byte // init config JSON
	timeout  time.Duration
	maxPages uint32 // max_memory_pages, enforced by guestMemory
	maxTable uint32 // max_table_elements, enforced by the table limits the rewrite sets
	logLimit logLimits
	fueled   bool         // instrumented by runtime/internal/fuel
	raw      bool         // not a plugin: no ABI checks, manifest or init (Host.raw)
	dirs     []*rootfs.FS // granted directories, closed with the module
	clock    bool         // the clock grant: real clocks and sleeps
	base     *slog.Logger // opts.Logger
	logger   *slog.Logger // base with the plugin's name

	pool chan *instance // idle slots; a nil slot means "instantiate"

	mu      sync.Mutex
	closing bool
	calls   sync.WaitGroup
}

type instance struct {
	m                                    *Module
	mod                                  api.Module
	mem                                  api.Memory
	fnBuffer, fnManifest, fnInit, fnProc api.Function
	bufAddr, bufSize                     uint32
	stack                                [1]uint64
	out                                  *logWriter // guest stdout
	errOut                               *logWriter // guest stderr, kept per call for errors (guestSaid)
	memory                               *guestMemory

	// reply is the reply of the current call, a copy of guest memory in
	// replyBuf, which the instance's calls reuse until one answers with
	// output records: those point into it, so the instance lets it go to
	// them (process) and the next reply gets a new buffer.
	reply, replyBuf []byte
	replyErr        error
	replied         bool // reply was called during the current call

	// ctx is the context of every call: it carries the instance to the host
	// functions and is never done. The call timeout (timer) sets timedOut,
	// the caller's cancellation canceled (seen through done), and the fuel
	// refill (hostFuel) turns either into a trap. A module the fuel rewriter
	// could not read is closed instead (timer, cancelFn), which its code
	// notices through WithCloseOnContextDone; wazero v1.12 then also starts
	// a watcher goroutine per call (~2 µs), whatever the context.
	ctx      context.Context
	until    time.Time // the end of the current call (or instantiation); zero: none
	timer    *time.Timer
	cancelFn func()
	done     <-chan struct{} // the caller's ctx.Done() during a call of a fueled guest
	timedOut atomic.Bool
	canceled atomic.Bool
	// wake ends a sleeping guest's sleep (clock grant) when its call times
	// out or is cancelled; sleepCut records that it did.
	wake     chan struct{}
	sleepCut bool

	tableReq api.Global // the table size a refused table.grow asked for (tableRequest), when instrumented
	log      logBudget  // what the current call may still log

	// guest runs the batches of a module of another host's ABI (nil: a
	// streamd plugin); replyPtr and replyLen are where in guest memory
	// its last reply was (Fluvio's copy_records, freed after the copy).
	guest              guest
	replyPtr, replyLen uint32
}

type instKey struct{}

func newModule(ctx context.Context, rt wazero.Runtime, name string, cm wazero.CompiledModule, fueled bool, maxPages, maxTable uint32, raw bool, opts plugins.Options) (_ *Module, err error) {
	m := &Module{
		raw:      raw,
		name:     name,
		fueled:   fueled,
		rt:       rt,
		timeout:  opts.Timeout,
		maxPages: maxPages,
		maxTable: maxTable,
		logLimit: newLogLimits(opts.Wasm),
		base:     discardLogger(opts.Logger),
	}
	m.logger = m.base.With("plugin", name)
	if m.timeout == 0 {
		m.timeout = DefaultTimeout
	}
	cfg := opts.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	if m.config, err = json.Marshal(cfg); err != nil {
		return nil, fmt.Errorf("%s: config: %w", name, err)
	}
	m.compiled = cm
	if m.abi, err = detectABI(name, m.compiled, fueled); err != nil && !raw {
		return nil, err
	}
	m.version = m.abi.Version
	if m.abi.Name != ABIStreamd && !raw {
		// A module of another host's ABI has no manifest: it is a
		// transform named after its file.
		if opts.Kind != "" && opts.Kind != plugins.KindTransform {
			return nil, fmt.Errorf("%s: the module is a %s (%s), which is a transform, not a %s", name, abiNoun(m.abi), m.abi, opts.Kind)
		}
		if m.foreign, err = newForeign(name, m.abi, opts); err != nil {
			return nil, err
		}
		m.manifest = plugins.Manifest{Name: foreignName(name), Kind: plugins.KindTransform}
		m.logger = m.base.With("plugin", m.manifest.Name)
		if err := instantiateForeign(ctx, rt, m.abi); err != nil {
			return nil, fmt.Errorf("%s: host module: %w", name, err)
		}
	}
	// Every WASI call looks at the call's deadline before and after it
	// runs (hostCalls): one can take milliseconds (random_get of the whole
	// memory), and a guest can make many between two fuel checks.
	if _, err := wasi_snapshot_preview1.Instantiate(experimental.WithFunctionListenerFactory(ctx, hostCalls{}), rt); err != nil {
		return nil, fmt.Errorf("%s: wasi: %w", name, err)
	}
	_, err = rt.NewHostModuleBuilder("streamd").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostReply), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, nil).
		WithParameterNames("ptr", "len").Export("reply").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostLog), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).
		WithParameterNames("level", "ptr", "len").Export("log").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostFuel), nil, []api.ValueType{api.ValueTypeI32}).
		Export(fuelImport).
		Instantiate(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: host module: %w", name, err)
	}
	m.modCfg = wazero.NewModuleConfig().WithName("").WithStartFunctions()
	if m.foreign != nil {
		// A Redpanda transform's environment: the stage's config and the
		// topics (docs/plugins.md); nothing of the host's.
		for _, kv := range m.foreign.env {
			m.modCfg = m.modCfg.WithEnv(kv[0], kv[1])
		}
	}
	// Grants beyond files (docs/abi.md section 11). Random bytes come from
	// crypto/rand unless asked otherwise: wazero's default, the same
	// sequence in every instance, repeats "unique" IDs and makes a Go
	// guest's map hash seeds known, and grants nothing of the host. The
	// clock is a grant: real time is a timing source and makes a
	// transform's output depend on when it runs.
	if !opts.Wasm.DeterministicRandom {
		m.modCfg = m.modCfg.WithRandSource(rand.Reader)
	}
	if opts.Wasm.Clock {
		m.clock = true
		m.modCfg = m.modCfg.WithSysWalltime().WithSysNanotime()
	}
	if len(opts.Wasm.Dirs) > 0 {
		var fsc wazero.FSConfig
		if fsc, err = m.openDirs(opts.Wasm.Dirs); err != nil {
			return nil, err
		}
		defer func() { // err is newModule's result
			if err != nil {
				_ = m.closeDirs()
			}
		}()
		m.modCfg = m.modCfg.WithFSConfig(fsc)
	}

	// The first instance answers the manifest and checks the config now,
	// so a bad plugin fails at load.
	inst, err := m.newInstance(ctx)
	if err != nil {
		return nil, err
	}
	if opts.Kind != "" && m.manifest.Kind != opts.Kind && !raw {
		inst.close(ctx)
		return nil, fmt.Errorf("%s: plugin %s is a %s plugin, not a %s", name, m.manifest.Name, m.manifest.Kind, opts.Kind)
	}
	if !opts.Wasm.Clock && importsClock(m.compiled) {
		m.logger.Info("plugin reads the clock without the clock grant: it sees a fake clock " +
			"(2022-01-01T00:00:00Z, 1 ms more per reading, sleeps return at once); clock = true grants the real one")
	}
	n := poolSize(opts.Pool)
	m.pool = make(chan *instance, n)
	m.pool <- inst
	for i := 1; i < n; i++ {
		m.pool <- nil
	}
	return m, nil
}

// Manifest returns what the plugin said about itself at load.
func (m *Module) Manifest() plugins.Manifest { return m.manifest }

// Path returns the file the module was loaded from.
func (m *Module) Path() string { return m.path }

// Call runs one batch: op on recs. It returns one Result per input record in
// order; a record the guest rejected has a *RejectError. A non-nil error
// (wrapping ErrBatch, ErrUnsupported or ErrClosed) fails the whole batch;
// the instance that failed is replaced, so the Module stays usable.
//
// Records in the results share no memory with guest memory. A record the
// guest kept unchanged (KEEP) is returned without a copy: its Records is
// recs[i:i+1], so the caller must not reuse the recs array while it uses
// the results.
func (m *Module) Call(ctx context.Context, op Op, recs []record.Record) ([]plugins.Result, error) {
	if !m.enter() {
		return nil, ErrClosed
	}
	defer m.calls.Done()
	if len(recs) == 0 { // a guest never sees a batch of count 0 (docs/abi.md section 7)
		return []plugins.Result{}, nil
	}
	var inst *instance
	select {
	case inst = <-m.pool:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if inst == nil {
		var err error
		if inst, err = m.newInstance(ctx); err != nil {
			m.pool <- nil
			return nil, err
		}
	}
	res, err := inst.process(ctx, op, recs)
	if inst.mod.IsClosed() || (err != nil && !errors.Is(err, ErrUnsupported)) || (inst.guest != nil && m.isClosing()) {
		// Trapped, timed out, or answered nonsense: replace it. (A
		// guest whose module is closing ends here too, its pool
		// having been emptied by Close.)
		inst.close(context.WithoutCancel(ctx))
		inst = nil
	}
	m.pool <- inst
	return res, err
}

func (m *Module) isClosing() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closing
}

// ABI returns what the module was written against.
func (m *Module) ABI() ABI { return m.abi }

func (m *Module) enter() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return false
	}
	m.calls.Add(1)
	return true
}

// Close waits for calls in progress to finish, then closes every instance
// and releases the module.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return nil
	}
	m.closing = true
	m.mu.Unlock()
	// Calls still running at ctx's end fail when the runtime closes under
	// them.
	_ = wait.Group(ctx, &m.calls)
	// The idle instances' guests end first: a Redpanda transform's
	// goroutine waits for its next batch until then.
	for done := false; !done; {
		select {
		case inst := <-m.pool:
			if inst != nil {
				inst.close(context.WithoutCancel(ctx))
			}
		default:
			done = true
		}
	}
	err := m.rt.Close(context.WithoutCancel(ctx))
	return errors.Join(err, m.closeDirs())
}

// openDirs opens the directories dirs grants (guest path -> host path, the
// host path ending in ":ro" for a read-only grant, ":rw" or nothing for a
// read-write one) as os.Root-backed file systems, which no link, `..` or
// rename takes the guest out of (runtime/internal/rootfs).
func (m *Module) openDirs(dirs map[string]string) (wazero.FSConfig, error) {
	guests := make([]string, 0, len(dirs))
	for g := range dirs {
		guests = append(guests, g)
	}
	slices.Sort(guests)
	cfg := wazero.NewFSConfig()
	for _, g := range guests {
		host, readOnly := DirGrant(dirs[g])
		if g == "" || host == "" {
			_ = m.closeDirs()
			return nil, fmt.Errorf("%s: dirs: %q = %q: want a guest path and a host directory", m.name, g, dirs[g])
		}
		d, err := rootfs.Open(host, readOnly)
		if err != nil {
			_ = m.closeDirs()
			return nil, fmt.Errorf("%s: dirs: %s = %s: %w", m.name, g, dirs[g], err)
		}
		m.dirs = append(m.dirs, d)
		cfg = cfg.(sysfs.FSConfig).WithSysFSMount(d, g)
	}
	return cfg, nil
}

func (m *Module) closeDirs() error {
	var errs []error
	for _, d := range m.dirs {
		errs = append(errs, d.Close())
	}
	m.dirs = nil
	return errors.Join(errs...)
}

// DirGrant splits the host side of a directory grant (plugins.Options.Dirs)
// into the directory and whether the grant is read-only: "dir:ro" is
// read-only, "dir:rw" and "dir" are read-write.
func DirGrant(host string) (dir string, readOnly bool) {
	if d, ok := strings.CutSuffix(host, ":ro"); ok {
		return d, true
	}
	if d, ok := strings.CutSuffix(host, ":rw"); ok {
		return d, false
	}
	return host, false
}

func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	name := m.name
	if m.manifest.Name != "" {
		name = m.manifest.Name
	}
	inst := &instance{m: m, memory: &guestMemory{limit: uint64(m.maxPages) * 65536}, wake: make(chan struct{}, 1)}
	inst.log.limits = m.logLimit
	inst.log.reset(1) // instantiation, _initialize, the manifest and init log as one record each
	inst.out = &logWriter{logger: m.logger, budget: &inst.log}
	inst.errOut = &logWriter{logger: m.logger, budget: &inst.log, keep: true}
	defer inst.endLog()
	inst.ctx = context.WithValue(context.Background(), instKey{}, inst)
	cfg := m.modCfg.WithStdout(inst.out).WithStderr(inst.errOut)
	if m.clock {
		cfg = cfg.WithNanosleep(inst.sleep)
	}
	ictx := experimental.WithMemoryAllocator(context.WithValue(ctx, instKey{}, inst), inst.memory)
	// One timeout for all of it: the start function and the segments as
	// the module is instantiated (a fueled start function is stopped by
	// hostFuel, which reads inst.until; another by wazero, through ictx),
	// _initialize, the manifest and init.
	if m.timeout > 0 {
		inst.until = time.Now().Add(m.timeout)
		var cancel context.CancelFunc
		ictx, cancel = context.WithDeadline(ictx, inst.until)
		defer cancel()
	}
	defer func() { inst.until = time.Time{} }()
	mod, err := m.rt.InstantiateModule(ictx, m.compiled, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: instantiate: %w", name, inst.failure(err, inst.timedOut.Load() || errors.Is(ictx.Err(), context.DeadlineExceeded)))
	}
	inst.mod = mod
	inst.tableReq = mod.ExportedGlobal(tableRequest)
	inst.timer = time.AfterFunc(time.Hour, func() {
		inst.timedOut.Store(true)
		inst.wakeUp()
		if !m.fueled { // an instrumented guest stops at its next refill
			_ = mod.CloseWithExitCode(context.Background(), sys.ExitCodeDeadlineExceeded)
		}
	})
	inst.timer.Stop()
	inst.cancelFn = func() {
		inst.canceled.Store(true)
		inst.wakeUp()
		if !m.fueled {
			_ = mod.CloseWithExitCode(context.Background(), sys.ExitCodeContextCanceled)
		}
	}
	inst.mem = mod.Memory()
	inst.fnBuffer = mod.ExportedFunction("streamd_buffer")
	inst.fnManifest = mod.ExportedFunction("streamd_manifest")
	inst.fnInit = mod.ExportedFunction("streamd_init")
	inst.fnProc = mod.ExportedFunction("streamd_process")
	if m.raw {
		return inst, nil
	}
	if m.foreign != nil {
		inst.guest = m.newGuest(inst)
		if err := inst.guest.start(ctx); err != nil {
			inst.close(ctx)
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return inst, nil
	}
	if fn := mod.ExportedFunction("_initialize"); fn != nil {
		if err := inst.invoke(ctx, fn); err != nil {
			inst.close(ctx)
			return nil, fmt.Errorf("%s: _initialize: %w", name, err)
		}
	}
	// Manifest.
	status, reply, err := inst.call(ctx, inst.fnManifest, 0)
	switch {
	case err != nil:
	case status != wire.StatusOK:
		err = fmt.Errorf("status %d: %s", status, reply)
	case !inst.replied:
		err = errors.New("the guest returned OK without calling reply (the manifest is the reply, docs/abi.md section 5)")
	}
	if err != nil {
		inst.close(ctx)
		return nil, fmt.Errorf("%s: streamd_manifest: %w", name, err)
	}
	man, err := parseManifest(m.name, m.version, reply)
	if err != nil {
		inst.close(ctx)
		return nil, err
	}
	if m.manifest.Name == "" {
		m.manifest = man
		m.logger = m.base.With("plugin", man.Name)
		inst.out.logger = m.logger
	} else if man != m.manifest {
		inst.close(ctx)
		return nil, fmt.Errorf("%s: a new instance answered manifest %+v, the first %+v", name, man, m.manifest)
	}
	// Init.
	if err := inst.input(ctx, uint32(len(m.config)), func(b []byte) { copy(b, m.config) }); err != nil {
		inst.close(ctx)
		return nil, fmt.Errorf("%s: streamd_init: %w", name, err)
	}
	status, reply, err = inst.call(ctx, inst.fnInit, uint32(len(m.config)))
	switch {
	case err != nil:
	case status == wire.StatusConfig:
		err = fmt.Errorf("plugin refused its config %s: %s", m.config, reply)
	case status != wire.StatusOK:
		err = fmt.Errorf("status %d: %s", status, reply)
	}
	if err != nil {
		inst.close(ctx)
		return nil, fmt.Errorf("%s: streamd_init: %w", name, err)
	}
	return inst, nil
}

// sleep is the guest's nanosleep under the clock grant (WASI poll_oneoff
// on a clock): it sleeps ns, but no longer than its call may run.
func (inst *instance) sleep(ns int64) {
	if ns <= 0 {
		return
	}
	if inst.timedOut.Load() || inst.canceled.Load() {
		inst.sleepCut = true
		return
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-inst.wake:
		inst.sleepCut = true
	case <-inst.done: // the caller's context, for a fueled guest
		inst.canceled.Store(true)
		inst.sleepCut = true
	}
}

func (inst *instance) wakeUp() {
	select {
	case inst.wake <- struct{}{}:
	default:
	}
}

// importsClock reports whether the module imports a WASI clock or sleep.
func importsClock(cm wazero.CompiledModule) bool {
	for _, fn := range cm.ImportedFunctions() {
		mod, name, _ := fn.Import()
		if mod == wasi_snapshot_preview1.ModuleName && (name == "clock_time_get" || name == "clock_res_get" || name == "poll_oneoff") {
			return true
		}
	}
	return false
}

func (inst *instance) close(ctx context.Context) {
	if inst.guest != nil {
		inst.guest.stop()
	}
	inst.timer.Stop()
	inst.out.flush()
	inst.errOut.flush()
	_ = inst.mod.Close(ctx)
}

// invoke calls fn with inst.stack, bounded by the timeout and by ctx.
func (inst *instance) invoke(ctx context.Context, fn api.Function) error {
	return inst.invokeStack(ctx, fn, inst.stack[:])
}

// invokeStack is invoke with a stack of its own (CallWithStack's).
func (inst *instance) invokeStack(ctx context.Context, fn api.Function, stack []uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if inst.m.timeout < 0 { // trusted: nothing can stop the guest
		return fn.CallWithStack(inst.ctx, stack)
	}
	var stop func() bool
	if inst.m.fueled {
		// hostFuel looks at ctx at every refill: no context.AfterFunc
		// (~0.7 µs) per call.
		inst.done = ctx.Done()
	} else if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, inst.cancelFn)
	}
	// No wake-up is left in inst.wake from an earlier call: whatever sent
	// one (the timer, cancelFn) also failed that call, and a failed
	// instance is not used again.
	inst.sleepCut = false
	inst.memory.refused = 0
	inst.errOut.kept = inst.errOut.kept[:0]
	// The call's deadline: the one of the whole call or instantiation
	// this is part of (inst.until), or this invocation's own.
	own := inst.until.IsZero()
	if own {
		inst.until = time.Now().Add(inst.m.timeout)
	}
	inst.timer.Reset(time.Until(inst.until))
	err := fn.CallWithStack(inst.ctx, stack)
	fired := !inst.timer.Stop()
	inst.done = nil
	if own {
		inst.until = time.Time{}
	}
	if stop != nil && !stop() {
		fired = true // cancelFn runs: the module is being closed
	}
	switch {
	case err != nil:
	case inst.sleepCut:
		// The guest slept less than it asked and carried on: its answer
		// does not count.
		err = errors.New("the guest's sleep was cut short")
	case fired:
		// The timeout or the cancellation came as the guest returned.
		// The flags it set would stop the instance's next call, so this
		// one, which did run out its time, fails and the instance goes.
		err = errors.New("the call ended as it ran out of time")
	}
	switch {
	case err == nil:
	case inst.canceled.Load() && !inst.timedOut.Load():
		err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
	default:
		err = inst.failure(err, inst.timedOut.Load())
	}
	return err
}

// failure says why a call of the guest failed with err, wrapping the
// plugins error of its kind: plugins.ErrTimeout when it ran out of time,
// plugins.ErrMemoryLimit when a memory growth was refused during it (the
// guest then usually traps), and plugins.ErrTrap otherwise, with what the
// guest wrote to stderr that explains it (a panic message) first.
func (inst *instance) failure(err error, timedOut bool) error {
	if timedOut {
		return fmt.Errorf("%w after %v: %w", plugins.ErrTimeout, inst.m.timeout, err)
	}
	if req := inst.tableRequested(); req > uint64(inst.m.maxTable) {
		return fmt.Errorf("%w: the guest asked for a table of %d elements (%s), more than %s allows: %w",
			plugins.ErrMemoryLimit, req, bytesText(req*8), tableLimitText(inst.m.maxTable), err)
	}
	if mem := inst.memory; mem.refused != 0 {
		asked := uint32((mem.refused - uint64(len(mem.buf)) + 65535) / 65536)
		return fmt.Errorf("%w: the guest asked for %d more %s with %s in use, more than %s allows: %w",
			plugins.ErrMemoryLimit, asked, strings.TrimPrefix(pagesText(asked), strconv.Itoa(int(asked))+" "),
			pagesText(uint32(len(mem.buf)/65536)), limitText(inst.m.maxPages), err)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("the guest exited with code %d (%w)", exit.ExitCode(), err)
	}
	if said := guestSaid(inst.errOut.kept); said != "" {
		return fmt.Errorf("%w: %s: %w", plugins.ErrTrap, said, err)
	}
	return fmt.Errorf("%w: %w", plugins.ErrTrap, err)
}

// tableRequested returns the table size the guest's last refused
// table.grow asked for, 0 if none (or the module is not instrumented).
func (inst *instance) tableRequested() uint64 {
	if inst.tableReq == nil {
		return 0
	}
	return inst.tableReq.Get()
}

// limited reports whether the guest hit a memory or table limit during the
// current call.
func (inst *instance) limited() bool {
	return inst.memory.refused != 0 || inst.tableRequested() > uint64(inst.m.maxTable)
}

// input makes room for n bytes in the guest's input buffer and lets fill
// write them there.
func (inst *instance) input(ctx context.Context, n uint32, fill func([]byte)) error {
	if n > inst.bufSize || inst.bufAddr == 0 {
		inst.stack[0] = uint64(n)
		if err := inst.invoke(ctx, inst.fnBuffer); err != nil {
			return fmt.Errorf("%w: streamd_buffer(%d): %w", ErrBatch, n, err)
		}
		addr := uint32(inst.stack[0])
		if addr == 0 {
			err := fmt.Errorf("streamd_buffer(%d): the guest could not provide the room (ERR_INTERNAL)", n)
			if inst.limited() {
				err = inst.failure(err, false)
			}
			return fmt.Errorf("%w: %w", ErrBatch, err)
		}
		inst.bufAddr, inst.bufSize = addr, max(n, 1)
	}
	view, ok := inst.mem.Read(inst.bufAddr, n)
	if !ok {
		inst.bufAddr, inst.bufSize = 0, 0
		return fmt.Errorf("%w: streamd_buffer returned %d bytes at %#x, outside guest memory (%d bytes)",
			ErrBatch, n, inst.bufAddr, inst.mem.Size())
	}
	fill(view)
	return nil
}

// call calls fn with arg (ignored when fn takes no parameter) and returns
// its status and reply.
//
// The reply is valid until the next call of the instance.
func (inst *instance) call(ctx context.Context, fn api.Function, arg uint32) (uint32, []byte, error) {
	inst.reply, inst.replyErr, inst.replied = nil, nil, false
	if cap(inst.replyBuf) > maxKeptReply {
		inst.replyBuf = nil // one huge reply does not pin its buffer forever
	}
	inst.stack[0] = uint64(arg)
	if err := inst.invoke(ctx, fn); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBatch, err)
	}
	if inst.replyErr != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBatch, inst.replyErr)
	}
	reply := inst.reply
	inst.reply = nil
	return uint32(inst.stack[0]), reply, nil
}

// maxKeptReply is the largest reply buffer an instance keeps for the next
// call.
const maxKeptReply = 1 << 20

// encode writes the request batch for op and recs into the guest's input
// buffer and returns its length. A batch that fits the buffer the guest gave
// last time is written in one pass; only one that does not is sized first,
// and the guest asked for a buffer of that size.
func (inst *instance) encode(ctx context.Context, op Op, recs []record.Record) (uint32, error) {
	if inst.bufAddr != 0 {
		if view, ok := inst.mem.Read(inst.bufAddr, inst.bufSize); ok {
			if n, ok := abi.EncodeRequest(view, wire.Op(op), recs); ok {
				return uint32(n), nil
			}
		}
	}
	size, err := abi.RequestSize(recs)
	if err != nil {
		return 0, err
	}
	n, ok := 0, false
	if err := inst.input(ctx, uint32(size), func(b []byte) { n, ok = abi.EncodeRequest(b, wire.Op(op), recs) }); err != nil {
		return 0, err
	}
	if !ok || n != size {
		return 0, fmt.Errorf("the records changed while they were encoded (%d bytes, then %d)", size, n)
	}
	return uint32(n), nil
}

func (inst *instance) process(ctx context.Context, op Op, recs []record.Record) ([]plugins.Result, error) {
	if inst.guest != nil {
		return inst.guest.process(ctx, op, recs)
	}
	m := inst.m
	// One deadline for the whole call: streamd_buffer, if the input needs
	// more room, and streamd_process.
	if m.timeout > 0 {
		inst.until = time.Now().Add(m.timeout)
		defer func() { inst.until = time.Time{} }()
	}
	if g, ok := inst.tableReq.(api.MutableGlobal); ok && g.Get() != 0 {
		g.Set(0)
	}
	inst.log.reset(len(recs))
	defer inst.endLog()
	size, err := inst.encode(ctx, op, recs)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %s: %w", m.manifest.Name, op, err)
	}
	status, reply, err := inst.call(ctx, inst.fnProc, size)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %s: %w", m.manifest.Name, op, err)
	}
	if status != wire.StatusOK && status != wire.StatusUnsupported && inst.limited() {
		// The guest failed the call after a refused growth: that is why.
		return nil, fmt.Errorf("plugin %s: %s: %w: %w", m.manifest.Name, op, ErrBatch,
			inst.failure(fmt.Errorf("status %d: %s", status, reply), false))
	}
	switch status {
	case wire.StatusOK:
	case wire.StatusBatch:
		return nil, fmt.Errorf("plugin %s: %s: %w (ERR_BATCH): %s", m.manifest.Name, op, ErrBatch, reply)
	case wire.StatusUnsupported:
		return nil, fmt.Errorf("plugin %s: %s: %w", m.manifest.Name, op, ErrUnsupported)
	case wire.StatusInternal:
		return nil, fmt.Errorf("plugin %s: %s: %w (ERR_INTERNAL): %s", m.manifest.Name, op, ErrBatch, reply)
	default:
		return nil, fmt.Errorf("plugin %s: %s: %w: unknown status %d: %s", m.manifest.Name, op, ErrBatch, status, reply)
	}
	if !inst.replied {
		return nil, fmt.Errorf("plugin %s: %s: %w: the guest returned OK without calling reply (a result batch has one entry per record, docs/abi.md section 8)",
			m.manifest.Name, op, ErrBatch)
	}
	// The reply is the instance's own copy of guest memory (hostReply):
	// the output records point into it, and the next call copies its reply
	// into a new buffer, rather than copying this one once more.
	res, kept, err := abi.DecodeResultOwned(reply, recs, inst.reject)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %s: %w: %w", m.manifest.Name, op, ErrBatch, err)
	}
	if kept {
		inst.replyBuf = nil
	}
	return res, nil
}

func (inst *instance) reject(reason string) error {
	return &RejectError{Plugin: inst.m.manifest.Name, Reason: reason}
}

func instFrom(ctx context.Context) *instance {
	inst, _ := ctx.Value(instKey{}).(*instance)
	return inst
}

// compileModule compiles bin, turning a panic in wazero (its v1.12
// validator panics on some malformed modules, found by fuzzing) into an
// error.
func compileModule(ctx context.Context, rt wazero.Runtime, bin []byte) (cm wazero.CompiledModule, err error) {
	defer func() {
		if v := recover(); v != nil {
			cm, err = nil, fmt.Errorf("wazero could not read it: %v", v)
		}
	}()
	return rt.CompileModule(ctx, bin)
}

// The fuel instrumentation's import: an instrumented guest calls
// streamd.$fuel every fuelRefill function entries or loop iterations (tens
// of microseconds of guest code).
const (
	fuelImport = "$fuel"
	fuelRefill = 10_000
)

// hostFuel implements streamd.$fuel() -> i32: it stops the guest when its
// call is over time or cancelled, and otherwise returns the next fuel.
// Being Go code, it also lets the scheduler and the garbage collector
// preempt the goroutine that runs the guest.
func hostFuel(ctx context.Context, _ api.Module, stack []uint64) {
	if inst := instFrom(ctx); inst != nil {
		inst.stopIfOver()
	}
	stack[0] = fuelRefill
}

// stopIfOver stops the guest (by a panic, which wazero turns into the
// call's error) when its call is over time or cancelled. It reads the
// clock itself rather than wait for the call's timer, whose goroutine may
// not get to run while every processor runs guest code.
func (inst *instance) stopIfOver() {
	select {
	case <-inst.done: // nil, so never ready, outside calls and for a context that is never done
		inst.canceled.Store(true)
	default:
	}
	if !inst.until.IsZero() && time.Now().After(inst.until) {
		inst.timedOut.Store(true)
	}
	if inst.timedOut.Load() {
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	}
	if inst.canceled.Load() {
		panic(sys.NewExitError(sys.ExitCodeContextCanceled))
	}
}

// hostCalls is the function listener factory of the WASI host module: each
// of its functions looks at the call's deadline before and after it runs,
// as the streamd module's own do (stopIfOver). A WASI call's work is
// bounded by what it is given (random_get fills at most the guest's
// memory), so a guest that makes host calls in a loop is stopped by the
// first one past its deadline, whatever the fuel says.
type hostCalls struct{}

func (hostCalls) NewFunctionListener(api.FunctionDefinition) experimental.FunctionListener {
	return hostCalls{}
}

func (hostCalls) Before(ctx context.Context, _ api.Module, _ api.FunctionDefinition, _ []uint64, _ experimental.StackIterator) {
	if inst := instFrom(ctx); inst != nil {
		inst.stopIfOver()
	}
}

func (hostCalls) After(ctx context.Context, _ api.Module, _ api.FunctionDefinition, _ []uint64) {
	if inst := instFrom(ctx); inst != nil {
		inst.stopIfOver()
	}
}

func (hostCalls) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}

// hostReply implements streamd.reply(ptr, len).
func hostReply(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instFrom(ctx)
	if inst == nil {
		return
	}
	inst.stopIfOver()
	ptr, n := uint32(stack[0]), uint32(stack[1])
	if mod.Memory() == nil {
		inst.replyErr = errors.New("reply from a module without memory")
		return
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		inst.replyErr = fmt.Errorf("reply(%#x, %d) is outside guest memory (%d bytes)", ptr, n, mod.Memory().Size())
		return
	}
	inst.replyBuf = append(inst.replyBuf[:0], b...)
	inst.reply = inst.replyBuf
	inst.replied = true
}

// hostLog implements streamd.log(level, ptr, len): one line, of at most
// the line limit's bytes, within what the call may still log (logBudget).
func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instFrom(ctx)
	if inst == nil {
		return
	}
	inst.stopIfOver()
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	lv := slog.LevelInfo
	switch {
	case level <= 0:
		lv = slog.LevelDebug
	case level == 2:
		lv = slog.LevelWarn
	case level >= 3:
		lv = slog.LevelError
	}
	if !inst.log.room() {
		inst.log.drop(int(n))
		return
	}
	if mod.Memory() == nil || uint64(ptr)+uint64(n) > uint64(mod.Memory().Size()) {
		// Within the budget too: a guest could make this line in a loop.
		inst.log.log(ctx, inst.m.logger, slog.LevelWarn, fmt.Appendf(nil, "log call outside guest memory: ptr %#x, len %d", ptr, n), 0)
		return
	}
	take := min(int(n), inst.log.limits.line)
	b, _ := mod.Memory().Read(ptr, uint32(take))
	inst.log.log(ctx, inst.m.logger, lv, b, int(n)-take)
	if lv >= slog.LevelError { // an error log line may say why the call fails (guestSaid)
		if w := inst.errOut; len(w.kept) < maxKept {
			w.kept = append(append(w.kept, b[:min(len(b), maxKept-len(w.kept))]...), '\n')
		}
	}
}

// logLimits bound what a guest logs: a line at most line bytes, a call at
// most lines lines and bytes bytes per record (plugins.WasmOptions).
type logLimits struct {
	line, lines, bytes int
}

func newLogLimits(o plugins.WasmOptions) logLimits {
	l := logLimits{line: o.MaxLogLineBytes, lines: o.MaxLogLinesPerRecord, bytes: o.MaxLogBytesPerRecord}
	if l.line <= 0 {
		l.line = plugins.DefaultMaxLogLineBytes
	}
	if l.lines <= 0 {
		l.lines = plugins.DefaultMaxLogLinesPerRecord
	}
	if l.bytes <= 0 {
		l.bytes = plugins.DefaultMaxLogBytesPerRecord
	}
	return l
}

// logBudget is what an instance's current call may still log (its log
// calls and its stdout and stderr lines), and what it dropped.
type logBudget struct {
	limits       logLimits
	records      int
	lines, bytes int // left
	droppedLines int
	droppedBytes int
}

// reset starts a call of records records (a call without any counts as
// one).
func (b *logBudget) reset(records int) {
	b.records = max(records, 1)
	b.lines = b.limits.lines * b.records
	b.bytes = b.limits.bytes * b.records
	b.droppedLines, b.droppedBytes = 0, 0
}

// room reports whether the call may log another line.
func (b *logBudget) room() bool { return b.lines > 0 && b.bytes > 0 }

// drop counts a line of n bytes that is not logged.
func (b *logBudget) drop(n int) {
	b.droppedLines++
	b.droppedBytes += n
}

// log logs msg, a line (cut to the line limit, over bytes more dropped),
// if the call may log another line.
func (b *logBudget) log(ctx context.Context, logger *slog.Logger, level slog.Level, msg []byte, over int, attrs ...any) {
	if !b.room() {
		b.drop(len(msg) + over)
		return
	}
	if len(msg) > b.bytes {
		over += len(msg) - b.bytes
		msg = msg[:b.bytes]
	}
	b.lines--
	b.bytes -= len(msg)
	text := string(msg)
	if over > 0 {
		b.droppedBytes += over
		text += " ...[" + strconv.Itoa(over) + " more bytes cut]"
	}
	logger.Log(ctx, level, text, attrs...)
}

// endLog ends the current call's log: one line says what was dropped.
func (inst *instance) endLog() {
	inst.out.flush()
	inst.errOut.flush()
	b := &inst.log
	if b.droppedLines == 0 && b.droppedBytes == 0 {
		return
	}
	l := b.limits
	inst.m.logger.Warn(fmt.Sprintf("plugin log over its limit: %d lines dropped in one call, %s cut or dropped; "+
		"a call may log %d lines and %s per record (%d here), a line at most %s",
		b.droppedLines, bytesText(uint64(b.droppedBytes)), l.lines, bytesText(uint64(l.bytes)), b.records, bytesText(uint64(l.line))))
	b.droppedLines, b.droppedBytes = 0, 0
}

// logWriter turns guest stdout/stderr into log lines, within the call's
// budget.
type logWriter struct {
	logger *slog.Logger
	budget *logBudget
	line   []byte // the current line, up to the line limit
	over   int    // bytes of the current line past the line limit
	// keep: also keep what the current call wrote (up to maxKept bytes)
	// in kept, so that a failure can say what the guest said (guestSaid).
	keep bool
	kept []byte
}

// maxKept bounds what a logWriter keeps of one call's output.
const maxKept = 64 << 10

func (w *logWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.keep && len(w.kept) < maxKept {
		w.kept = append(w.kept, p[:min(len(p), maxKept-len(w.kept))]...)
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		take := min(len(chunk), max(w.budget.limits.line-len(w.line), 0))
		w.line = append(w.line, chunk[:take]...)
		w.over += len(chunk) - take
		if i < 0 {
			break
		}
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

func (w *logWriter) emit() {
	w.budget.log(context.Background(), w.logger, slog.LevelInfo, w.line, w.over, "stream", "stdio")
	w.line, w.over = w.line[:0], 0
}

func (w *logWriter) flush() {
	if len(w.line) > 0 || w.over > 0 {
		w.emit()
	}
}

// guestSaid picks out of what a guest wrote to stderr during a failed call
// the line that says why: a Rust panic ("thread '...' panicked at ..." and,
// since Rust 1.73, the message on the lines after it), a Go panic or fatal
// error ("panic: ...", "fatal error: ..."), an AssemblyScript abort
// ("abort: ..."), or else the last line written. At most 1 KiB.
func guestSaid(out []byte) string {
	lines := strings.Split(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n")
	said := ""
	for i, l := range lines {
		switch {
		case strings.Contains(l, "panicked at "):
			said = l
			if strings.HasSuffix(l, ":") { // Rust >= 1.73: the message follows
				for _, m := range lines[i+1:] {
					if m == "" || strings.HasPrefix(m, "note: ") || strings.HasPrefix(m, "stack backtrace:") {
						break
					}
					said += " " + m
				}
			}
		case strings.HasPrefix(l, "panic: "), strings.HasPrefix(l, "fatal error: "), strings.HasPrefix(l, "abort: "):
			said = l
		default:
			continue
		}
		break
	}
	if said == "" {
		for i := len(lines) - 1; i >= 0; i-- {
			if l := strings.TrimSpace(lines[i]); l != "" {
				said = "the guest wrote to stderr: " + l
				break
			}
		}
	}
	if len(said) > 1024 {
		said = said[:1021] + "..."
	}
	return strings.ToValidUTF8(said, "\ufffd")
}

// guestMemory is an instance's linear memory (wazero's
// experimental.LinearMemory). It enforces max_memory_pages itself (wazero's
// own limit is set to the most Wasm allows), so that it knows when it
// refused a growth and the error can say so.
type guestMemory struct {
	buf     []byte
	limit   uint64 // bytes
	refused uint64 // the size in bytes of the growth refused in the current call, 0 if none
}

// Allocate implements experimental.MemoryAllocator.
func (g *guestMemory) Allocate(capacity, maxBytes uint64) experimental.LinearMemory {
	g.limit = min(g.limit, maxBytes)
	g.buf = make([]byte, 0, min(capacity, g.limit))
	return g
}

// Reallocate implements experimental.LinearMemory: it grows the memory to
// size bytes, or returns nil (memory.grow returns -1) above the limit.
func (g *guestMemory) Reallocate(size uint64) []byte {
	if size > g.limit {
		g.refused = size
		return nil
	}
	if size <= uint64(cap(g.buf)) {
		g.buf = g.buf[:size]
	} else {
		g.buf = append(g.buf, make([]byte, size-uint64(len(g.buf)))...)
	}
	return g.buf
}

// Free implements experimental.LinearMemory.
func (g *guestMemory) Free() { g.buf = nil }
