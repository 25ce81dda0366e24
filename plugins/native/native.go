package native

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/streamd/streamd/plugins"
	pluginv1 "github.com/streamd/streamd/proto/streamd/plugin/v1"
	"github.com/streamd/streamd/record"
)

// Defaults for the loader's Options.
const (
	// DefaultTimeout bounds one call into a plugin process
	// (plugins.DefaultTimeout, 5s).
	DefaultTimeout = plugins.DefaultTimeout
	// DefaultShutdownTimeout bounds how long a plugin may take to exit.
	DefaultShutdownTimeout = 5 * time.Second
)

// supervision configures restarts. Open uses defaultSupervision; tests shorten it.
type supervision struct {
	// backoffMin and backoffMax bound the wait before a restart; it doubles
	// after each consecutive crash.
	backoffMin, backoffMax time.Duration
	// maxCrashes crashes within window put the plugin into a failed state.
	maxCrashes int
	window     time.Duration
	// startTimeout bounds the start of a process (handshake).
	startTimeout time.Duration
}

var defaultSupervision = supervision{
	backoffMin:   100 * time.Millisecond,
	backoffMax:   5 * time.Second,
	maxCrashes:   5,
	window:       time.Minute,
	startTimeout: 30 * time.Second,
}

// Open starts the native plugin binary at path and returns it as a
// plugins.Plugin that also implements, by its manifest's kind,
// plugins.Transformer, plugins.Codec or plugins.Sink. Every value Open returns
// also has the method
//
//	Health() error
//
// which is nil while the plugin works and the reason once it has failed for
// good (too many crashes within a window).
//
// Of opts, Kind, Config, Logger, Timeout (negative: calls have no timeout
// but ctx's), Checksum, ShutdownTimeout and Pool apply. Pool processes
// (default 1) are started, each serving one call at a time, so up to Pool
// calls run in parallel; each process is supervised on its own.
// ctx bounds the start; the plugin's processes outlive it until Close.
func Open(ctx context.Context, path string, opts plugins.Options) (plugins.Plugin, error) {
	return open(ctx, path, opts, defaultSupervision)
}

func open(ctx context.Context, path string, opts plugins.Options, sup supervision) (plugins.Plugin, error) {
	if path == "" {
		return nil, errors.New("native plugin: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("native plugin %s: %w", path, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("native plugin %s: %w", path, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("native plugin %s: not an executable file", path)
	}
	var sum []byte
	if opts.Native.Checksum != "" {
		sum, err = hex.DecodeString(strings.TrimSpace(opts.Native.Checksum))
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("native plugin %s: checksum %q is not a hex SHA-256 (64 hex digits)", path, opts.Native.Checksum)
		}
	}
	cfg := opts.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("native plugin %s: config: %w", path, err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Native.ShutdownTimeout <= 0 {
		opts.Native.ShutdownTimeout = DefaultShutdownTimeout
	}
	n := max(opts.Pool, 1)
	first := newSupervisor(path, abs, sum, cfgJSON, opts, sup)
	if err := first.startFirst(ctx); err != nil {
		return nil, err
	}
	base := &nativePlugin{sups: []*supervisor{first}, idle: make(chan *supervisor, n), closed: make(chan struct{})}
	base.idle <- first
	for i := 1; i < n; i++ {
		s := newSupervisor(path, abs, sum, cfgJSON, opts, sup)
		err := s.startFirst(ctx)
		if err == nil && s.manifest != first.manifest {
			err = fmt.Errorf("native plugin %s: process %d's manifest %+v differs from the first one %+v", path, i+1, s.manifest, first.manifest)
			_ = s.close(ctx)
		}
		if err != nil {
			_ = base.Close(ctx)
			return nil, err
		}
		base.sups = append(base.sups, s)
		base.idle <- s
	}
	switch first.manifest.Kind {
	case plugins.KindTransform:
		return &transformPlugin{base}, nil
	case plugins.KindCodec:
		return &codecPlugin{base}, nil
	default:
		return &sinkPlugin{base}, nil
	}
}

// nativePlugin is what every kind has: opts.Pool supervised processes (at
// least one), each serving one call at a time.
type nativePlugin struct {
	sups      []*supervisor
	idle      chan *supervisor
	closed    chan struct{}
	closeOnce sync.Once
}

// process runs one call on an idle process of the pool.
func (p *nativePlugin) process(ctx context.Context, op pluginv1.Op, recs []*pluginv1.Record) ([]*pluginv1.Result, error) {
	var s *supervisor
	select {
	case s = <-p.idle:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.closed:
		return nil, fmt.Errorf("native plugin %s: %w", p.name(), errClosed)
	}
	defer func() { p.idle <- s }()
	return s.process(ctx, op, recs)
}

func (p *nativePlugin) name() string { return p.sups[0].manifest.Name }

// Manifest implements plugins.Plugin.
func (p *nativePlugin) Manifest() plugins.Manifest { return p.sups[0].manifest }

// Close implements plugins.Plugin: it asks every process to shut down and
// kills those that have not exited within the shutdown timeout or ctx's
// deadline, whichever comes first.
func (p *nativePlugin) Close(ctx context.Context) error {
	p.closeOnce.Do(func() { close(p.closed) })
	errs := make([]error, len(p.sups))
	var wg sync.WaitGroup
	for i, s := range p.sups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.close(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Health is nil while the plugin works, and the reason once too many crashes
// within the crash window have put one of its processes into a failed state.
func (p *nativePlugin) Health() error {
	for _, s := range p.sups {
		if err := s.health(); err != nil {
			return err
		}
	}
	return nil
}

type transformPlugin struct{ *nativePlugin }

type codecPlugin struct{ *nativePlugin }

type sinkPlugin struct{ *nativePlugin }

var (
	_ plugins.Transformer = (*transformPlugin)(nil)
	_ plugins.Codec       = (*codecPlugin)(nil)
	_ plugins.Sink        = (*sinkPlugin)(nil)
)

// Transform implements plugins.Transformer. Output records keep the input's
// Topic, Partition and Offset (where the record they came from was read);
// their key, value, headers and timestamp are the plugin's.
func (p *transformPlugin) Transform(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	res, err := p.process(ctx, pluginv1.Op_OP_TRANSFORM, pluginv1.FromRecords(batch))
	if err != nil {
		return nil, err
	}
	return transformResults(p.name(), batch, res)
}

// transformResults turns a plugin's results for batch into plugins.Results.
// The caller has checked that there is one result per record.
func transformResults(name string, batch []record.Record, res []*pluginv1.Result) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(res))
	for i, r := range res {
		switch o := r.GetOutcome().(type) {
		case *pluginv1.Result_Keep:
			out[i].Records = []record.Record{batch[i]}
		case *pluginv1.Result_Error:
			out[i].Err = recordErr(o.Error)
		case *pluginv1.Result_Records:
			recs := o.Records.GetRecords()
			if len(recs) == 0 {
				continue
			}
			out[i].Records = make([]record.Record, len(recs))
			for j, x := range recs {
				r := x.ToRecord()
				r.Topic, r.Partition, r.Offset = batch[i].Topic, batch[i].Partition, batch[i].Offset
				out[i].Records[j] = r
			}
		default:
			return nil, fmt.Errorf("native plugin %s: transform result %d has no outcome", name, i)
		}
	}
	return out, nil
}

// Encode implements plugins.Codec.
func (p *codecPlugin) Encode(ctx context.Context, payloads [][]byte) ([]plugins.Payload, error) {
	return p.codec(ctx, pluginv1.Op_OP_ENCODE, payloads)
}

// Decode implements plugins.Codec.
func (p *codecPlugin) Decode(ctx context.Context, payloads [][]byte) ([]plugins.Payload, error) {
	return p.codec(ctx, pluginv1.Op_OP_DECODE, payloads)
}

func (p *codecPlugin) codec(ctx context.Context, op pluginv1.Op, payloads [][]byte) ([]plugins.Payload, error) {
	if len(payloads) == 0 {
		return nil, nil
	}
	in := make([]*pluginv1.Record, len(payloads))
	for i, b := range payloads {
		if b == nil {
			b = []byte{}
		}
		in[i] = &pluginv1.Record{Offset: -1, Partition: -1, TimestampMs: pluginv1.NoTimestamp, Value: b}
	}
	res, err := p.process(ctx, op, in)
	if err != nil {
		return nil, err
	}
	return codecResults(p.name(), op, payloads, res)
}

// codecResults turns a plugin's results for payloads into plugins.Payloads.
func codecResults(name string, op pluginv1.Op, payloads [][]byte, res []*pluginv1.Result) ([]plugins.Payload, error) {
	out := make([]plugins.Payload, len(res))
	for i, r := range res {
		switch o := r.GetOutcome().(type) {
		case *pluginv1.Result_Error:
			out[i].Err = recordErr(o.Error)
		case *pluginv1.Result_Records:
			if n := len(o.Records.GetRecords()); n != 1 {
				return nil, fmt.Errorf("native plugin %s: %s result %d has %d records, a codec must return exactly one", name, op, i, n)
			}
			out[i].Data = o.Records.GetRecords()[0].GetValue()
		case *pluginv1.Result_Keep:
			out[i].Data = payloads[i]
		default:
			return nil, fmt.Errorf("native plugin %s: %s result %d has no outcome", name, op, i)
		}
	}
	return out, nil
}

// Write implements plugins.Sink.
func (p *sinkPlugin) Write(ctx context.Context, batch []record.Record) ([]error, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	res, err := p.process(ctx, pluginv1.Op_OP_WRITE, pluginv1.FromRecords(batch))
	if err != nil {
		return nil, err
	}
	return sinkResults(p.name(), res)
}

// sinkResults turns a plugin's write results into per-record errors.
func sinkResults(name string, res []*pluginv1.Result) ([]error, error) {
	errs := make([]error, len(res))
	for i, r := range res {
		switch o := r.GetOutcome().(type) {
		case *pluginv1.Result_Error:
			errs[i] = recordErr(o.Error)
		case *pluginv1.Result_Records:
			if n := len(o.Records.GetRecords()); n != 0 {
				return nil, fmt.Errorf("native plugin %s: write result %d has %d records, a sink must return none", name, i, n)
			}
		case *pluginv1.Result_Keep:
			// KEEP from a sink means durably written, as in the Wasm ABI.
		default:
			return nil, fmt.Errorf("native plugin %s: write result %d has no outcome", name, i)
		}
	}
	return errs, nil
}

// recordErr is a per-record rejection with the plugin's reason.
func recordErr(msg string) error { return errors.New(msg) }

// sup gives tests the first process's supervisor.
func (p *nativePlugin) sup() *supervisor { return p.sups[0] }
