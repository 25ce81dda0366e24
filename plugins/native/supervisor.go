package native

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"

	"github.com/streamd/streamd/internal/x/wait"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/native/internal/logs"
	pluginv1 "github.com/streamd/streamd/proto/streamd/plugin/v1"
)

// maxMsg is the largest gRPC message the host sends or accepts.
const maxMsg = 1<<31 - 1

var nameRE = regexp.MustCompile(`^[a-z0-9._-]{1,64}$`)

// errClosed is returned by calls after Close.
var errClosed = errors.New("plugin is closed")

// supervisor owns a plugin's process: it starts it, serializes calls into
// it, restarts it when it dies and stops it on close.
type supervisor struct {
	ref      string // the path as configured, for messages
	abs      string
	checksum []byte
	config   []byte
	opts     plugins.Options
	sup      supervision
	base     *slog.Logger // opts.Logger or a discarding one
	log      *slog.Logger // base tagged with plugin=the manifest's name (the path until known)

	manifest plugins.Manifest // set by startFirst, then fixed

	done     chan struct{} // closed by close: interrupts calls
	doneOnce sync.Once

	mu       sync.Mutex // serializes calls, restarts and close
	proc     *process   // nil: none running; set with setProc
	procPtr  atomic.Pointer[process]
	crashes  []time.Time
	backoff  time.Duration
	restarts int
	closed   bool

	failedMu sync.Mutex
	failed   error
}

// process is one running plugin process.
type process struct {
	client *plugin.Client
	cmd    *exec.Cmd
	rpc    pluginv1.PluginClient
	stderr *logs.LineWriter
	stdout *logs.LineWriter
}

func newSupervisor(ref, abs string, checksum, config []byte, opts plugins.Options, sup supervision) *supervisor {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &supervisor{
		ref: ref, abs: abs, checksum: checksum, config: config, opts: opts, sup: sup,
		base: log,
		log:  log.With("plugin", ref),
		done: make(chan struct{}),
	}
}

// startFirst starts the first process and checks its manifest against
// opts.Kind.
func (s *supervisor) startFirst(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, m, err := s.start(ctx)
	if err != nil {
		return err
	}
	s.setProc(p)
	s.manifest = m
	s.log = s.base.With("plugin", m.Name)
	return nil
}

// start starts a process, reads its manifest and inits it. It checks the
// manifest against opts.Kind and, on a restart, against the first manifest.
func (s *supervisor) start(ctx context.Context) (*process, plugins.Manifest, error) {
	var m plugins.Manifest
	fail := func(err error) (*process, plugins.Manifest, error) {
		return nil, m, fmt.Errorf("native plugin %s: %w", s.ref, err)
	}
	p := &process{
		cmd:    exec.Command(s.abs),
		stderr: logs.NewLineWriter(s.log, "stderr"),
		stdout: logs.NewLineWriter(s.log, "stdout"),
	}
	setProcAttr(p.cmd)
	pool := pluginv1.BufferPool()
	cc := &plugin.ClientConfig{
		HandshakeConfig: pluginv1.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{
			pluginv1.ProtocolVersion: {pluginv1.PluginSetName: &pluginv1.GRPCPlugin{}},
		},
		Cmd:              p.cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logs.NewHCLog(s.log, filepath.Base(s.abs)),
		Stderr:           p.stderr,
		SyncStdout:       p.stdout,
		SyncStderr:       p.stderr,
		StartTimeout:     s.sup.startTimeout,
		GRPCDialOptions: []grpc.DialOption{
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg), grpc.ForceCodecV2(pluginv1.Codec(pool))),
			experimental.WithBufferPool(pool),
		},
	}
	if s.checksum != nil {
		cc.SecureConfig = &plugin.SecureConfig{Checksum: s.checksum, Hash: sha256.New()}
	}
	p.client = plugin.NewClient(cc)
	rpcClient, err := p.client.Client()
	if err != nil {
		p.client.Kill()
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
			return fail(fmt.Errorf("binary's SHA-256 does not match the configured checksum %x: %w", s.checksum, err))
		}
		if strings.Contains(strings.ToLower(err.Error()), "incompatible api version") {
			return fail(fmt.Errorf("plugin speaks another protocol version; this streamd supports native protocol v%d: %w", pluginv1.ProtocolVersion, err))
		}
		return fail(fmt.Errorf("start: %w", err))
	}
	raw, err := rpcClient.Dispense(pluginv1.PluginSetName)
	if err != nil {
		p.client.Kill()
		return fail(fmt.Errorf("dispense: %w", err))
	}
	p.rpc = raw.(pluginv1.PluginClient)

	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	mr, err := p.rpc.Manifest(cctx, &pluginv1.ManifestRequest{})
	if err != nil {
		p.client.Kill()
		return fail(fmt.Errorf("manifest: %w", err))
	}
	m = plugins.Manifest{Name: mr.GetName(), Kind: plugins.Kind(mr.GetKind()), Version: mr.GetVersion(), ABI: int(mr.GetProtocol())}
	if err := s.checkManifest(m, p.client.NegotiatedVersion()); err != nil {
		p.client.Kill()
		return fail(err)
	}
	named := s.base.With("plugin", m.Name)
	p.stderr.SetLogger(named)
	p.stdout.SetLogger(named)
	if _, err := p.rpc.Init(cctx, &pluginv1.InitRequest{ConfigJson: s.config}); err != nil {
		p.client.Kill()
		if status.Code(err) == codes.InvalidArgument {
			return fail(fmt.Errorf("config refused: %s", status.Convert(err).Message()))
		}
		return fail(fmt.Errorf("init: %w", err))
	}
	return p, m, nil
}

func (s *supervisor) checkManifest(m plugins.Manifest, negotiated int) error {
	switch {
	case !nameRE.MatchString(m.Name):
		return fmt.Errorf("manifest name %q does not match [a-z0-9._-]{1,64}", m.Name)
	case m.Kind != plugins.KindTransform && m.Kind != plugins.KindCodec && m.Kind != plugins.KindSink:
		return fmt.Errorf("manifest kind %q is not transform, codec or sink", m.Kind)
	case m.ABI != negotiated:
		return fmt.Errorf("manifest says protocol %d, but the handshake negotiated %d", m.ABI, negotiated)
	case s.opts.Kind != "" && m.Kind != s.opts.Kind:
		return fmt.Errorf("plugin %s is a %s, the config needs a %s", m.Name, m.Kind, s.opts.Kind)
	case s.manifest.Name != "" && m != s.manifest:
		return fmt.Errorf("restarted plugin's manifest %+v differs from the first one %+v", m, s.manifest)
	}
	return nil
}

func (s *supervisor) health() error {
	s.failedMu.Lock()
	defer s.failedMu.Unlock()
	return s.failed
}

// crashed records a crash and reports whether it put the plugin into the
// failed state. s.mu is held.
func (s *supervisor) crashed(cause error) bool {
	now := time.Now()
	keep := s.crashes[:0]
	for _, t := range s.crashes {
		if now.Sub(t) < s.sup.window {
			keep = append(keep, t)
		}
	}
	s.crashes = append(keep, now)
	if s.backoff == 0 {
		s.backoff = s.sup.backoffMin
	} else {
		s.backoff = min(2*s.backoff, s.sup.backoffMax)
	}
	if len(s.crashes) < s.sup.maxCrashes {
		s.log.Warn("native plugin process failed; restarting", "crashes_in_window", len(s.crashes), "backoff", s.backoff, "error", cause)
		return false
	}
	err := fmt.Errorf("native plugin %s: failed: %d crashes within %s, last: %w", s.name(), len(s.crashes), s.sup.window, cause)
	s.failedMu.Lock()
	s.failed = err
	s.failedMu.Unlock()
	s.log.Error("native plugin failed", "error", err)
	return true
}

func (s *supervisor) name() string {
	if s.manifest.Name != "" {
		return s.manifest.Name
	}
	return s.ref
}

// stopProc kills the current process at once. s.mu is held.
func (s *supervisor) stopProc() {
	if s.proc == nil {
		return
	}
	p := s.proc
	s.setProc(nil)
	killTree(p.cmd)
	p.client.Kill()
	p.stderr.Flush()
	p.stdout.Flush()
}

// process sends one batch and returns one result per record. If the process
// is dead or dies during the call, it restarts it (after the backoff) and
// retries the batch until it succeeds, ctx ends, the plugin is closed or it
// enters the failed state.
func (s *supervisor) process(ctx context.Context, op pluginv1.Op, recs []*pluginv1.Record) ([]*pluginv1.Result, error) {
	ctx, cancel := wait.WithStop(ctx, s.done)
	defer cancel()

	s.mu.Lock()
	defer s.mu.Unlock()
	req := &pluginv1.ProcessRequest{Op: op, Records: recs}
	for {
		if s.closed {
			return nil, fmt.Errorf("native plugin %s: %w", s.name(), errClosed)
		}
		if err := s.health(); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.proc != nil && s.proc.client.Exited() {
			s.stopProc()
			if s.crashed(errors.New("process exited")) {
				return nil, s.health()
			}
		}
		if s.proc == nil {
			if err := wait.Sleep(ctx, s.backoff); err != nil {
				return nil, err
			}
			p, _, err := s.start(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if s.crashed(err) {
					return nil, s.health()
				}
				continue
			}
			s.setProc(p)
			s.restarts++
			s.log.Info("native plugin process restarted", "restarts", s.restarts)
		}

		cctx, ccancel := s.callCtx(ctx)
		resp, err := s.proc.rpc.Process(cctx, req)
		ccancel()
		if err == nil {
			if n := len(resp.GetResults()); n != len(recs) {
				return nil, fmt.Errorf("native plugin %s: %s: %d results for %d records", s.name(), op, n, len(recs))
			}
			s.backoff = 0
			return resp.GetResults(), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch code := status.Code(err); {
		case code == codes.Unavailable || s.proc.client.Exited():
			// The process died or its connection broke: restart, retry.
			s.stopProc()
			if s.crashed(err) {
				return nil, s.health()
			}
		case code == codes.DeadlineExceeded:
			// The process is stuck: throw it away; the batch fails.
			s.stopProc()
			s.crashed(err)
			return nil, fmt.Errorf("native plugin %s: %s: %w: no answer within %s: %w", s.name(), op, plugins.ErrTimeout, s.opts.Timeout, err)
		case code == codes.Unimplemented:
			return nil, fmt.Errorf("native plugin %s: does not serve op %s: %s", s.name(), op, status.Convert(err).Message())
		default:
			return nil, fmt.Errorf("native plugin %s: %s: batch failed: %s", s.name(), op, status.Convert(err).Message())
		}
	}
}

// close stops the process: Shutdown RPC, then go-plugin's kill, all within
// the shutdown timeout (or ctx's deadline, if earlier), after which the
// process is killed.
func (s *supervisor) close(ctx context.Context) error {
	s.doneOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	p := s.proc
	s.setProc(nil)
	if p == nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Native.ShutdownTimeout)
	defer cancel()
	if d, ok := ctx.Deadline(); ok {
		var c2 context.CancelFunc
		dctx, c2 = context.WithDeadline(dctx, d)
		defer c2()
	}
	exited := make(chan error, 1)
	go func() {
		_, err := p.rpc.Shutdown(dctx, &pluginv1.ShutdownRequest{})
		p.client.Kill() // graceful go-plugin stop, then kill after its own 2 s
		exited <- err
	}()
	var err error
	select {
	case err = <-exited:
		if err != nil && status.Code(err) != codes.Unavailable {
			err = fmt.Errorf("native plugin %s: shutdown: %s", s.name(), status.Convert(err).Message())
		} else {
			err = nil
		}
	case <-dctx.Done():
		s.log.Warn("native plugin did not exit within its shutdown deadline; killing it", "deadline", s.opts.Native.ShutdownTimeout)
		killTree(p.cmd)
		select {
		case werr := <-exited:
			s.log.Debug("native plugin killed", "wait", werr)
		case <-time.After(2 * time.Second):
		}
		err = fmt.Errorf("native plugin %s: did not exit within %s; killed", s.name(), s.opts.Native.ShutdownTimeout)
	}
	p.stderr.Flush()
	p.stdout.Flush()
	return err
}

// pid is the current process's id, or 0 when none runs (for tests).
func (s *supervisor) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.cmd.Process == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// pidUnlocked is pid without s.mu, for a test that kills the process while
// a call holds s.mu. It reads a pointer that may be replaced concurrently,
// so it is only for tests.
func (s *supervisor) pidUnlocked() int {
	p := s.procPtr.Load()
	if p == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// setProc replaces the current process. s.mu is held.
func (s *supervisor) setProc(p *process) {
	s.proc = p
	s.procPtr.Store(p)
}

// callCtx bounds one call by opts.Timeout; a negative Timeout leaves only
// ctx's deadline.
func (s *supervisor) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.opts.Timeout < 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.opts.Timeout)
}
