package native

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime/pprof"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/streamd/streamd/proto/streamd/plugin/v1"
	"github.com/streamd/streamd/record"
)

// Result is what a transform made of one input record: output records (none
// drops the record), Keep (the input record unchanged), or Err (the record is
// rejected with Err's message as the reason).
type Result struct {
	Records []record.Record
	Keep    bool
	Err     error
}

// Transformer transforms a batch: one Result per input record, in order. A
// non-nil error fails the whole batch.
type Transformer interface {
	Transform(ctx context.Context, batch []record.Record) ([]Result, error)
}

// TransformFunc is a Transformer that transforms one record at a time.
type TransformFunc func(ctx context.Context, r record.Record) Result

// Transform implements Transformer.
func (f TransformFunc) Transform(ctx context.Context, batch []record.Record) ([]Result, error) {
	out := make([]Result, len(batch))
	for i, r := range batch {
		out[i] = f(ctx, r)
	}
	return out, nil
}

// Payload is a codec's output for one input payload: Data, or Err (the
// payload is rejected with Err's message as the reason).
type Payload struct {
	Data []byte
	Err  error
}

// Codec encodes and decodes payloads, a batch at a time: one Payload per
// input, in order. A non-nil error fails the whole batch.
type Codec interface {
	Encode(ctx context.Context, payloads [][]byte) ([]Payload, error)
	Decode(ctx context.Context, payloads [][]byte) ([]Payload, error)
}

// Sink writes a batch and reports, per record, whether it was durably
// written: errs has one entry per input, nil where the record is durable. A
// non-nil error fails the whole batch.
type Sink interface {
	Write(ctx context.Context, batch []record.Record) (errs []error, err error)
}

// kind is the plugin kind a Plugin serves, as its manifest names it.
type kind string

const (
	kindTransform kind = "transform"
	kindCodec     kind = "codec"
	kindSink      kind = "sink"
)

// Plugin describes a native plugin. Exactly one of Transformer, Codec and
// Sink must be set.
type Plugin struct {
	// Name matches [a-z0-9._-]{1,64}.
	Name string
	// Version is the plugin's own version, e.g. "1.0.0".
	Version string

	Transformer Transformer
	Codec       Codec
	Sink        Sink

	// Init, if set, receives the plugin's config table from the streamd TOML
	// as a JSON object ("{}" when there is none) before the first batch. An
	// error refuses the config: the pipeline does not start.
	Init func(ctx context.Context, config json.RawMessage) error
	// Close, if set, is called when streamd stops the plugin. streamd kills
	// the process when Close outlasts its shutdown deadline.
	Close func(ctx context.Context) error
}

var nameRE = regexp.MustCompile(`^[a-z0-9._-]{1,64}$`)

func (p *Plugin) kind() (kind, error) {
	var kinds []kind
	if p.Transformer != nil {
		kinds = append(kinds, kindTransform)
	}
	if p.Codec != nil {
		kinds = append(kinds, kindCodec)
	}
	if p.Sink != nil {
		kinds = append(kinds, kindSink)
	}
	if !nameRE.MatchString(p.Name) {
		return "", fmt.Errorf("plugin name %q does not match [a-z0-9._-]{1,64}", p.Name)
	}
	if len(kinds) != 1 {
		return "", fmt.Errorf("plugin %s: exactly one of Transformer, Codec and Sink must be set, got %d", p.Name, len(kinds))
	}
	return kinds[0], nil
}

// maxMsg is the largest gRPC message a plugin accepts or sends.
const maxMsg = math.MaxInt32

// Serve runs the plugin until streamd stops it, then returns. It exits the
// process with status 1 if p is invalid or the process was not started by
// streamd (the handshake's magic cookie is missing).
//
// With the environment variable STREAMD_PLUGIN_CPUPROFILE=FILE (inherited
// from streamd), the plugin writes a Go CPU profile of its whole life to
// FILE.PID.
func Serve(p Plugin) {
	kind, err := p.kind()
	if err != nil {
		fmt.Fprintln(os.Stderr, "streamd native plugin:", err)
		os.Exit(1)
	}
	srv := &server{p: p, kind: kind}
	if path := os.Getenv("STREAMD_PLUGIN_CPUPROFILE"); path != "" {
		if stop, err := startCPUProfile(path); err != nil {
			fmt.Fprintln(os.Stderr, "streamd native plugin: cpu profile:", err)
		} else {
			defer stop()
		}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: pluginv1.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{
			pluginv1.ProtocolVersion: {pluginv1.PluginSetName: &pluginv1.GRPCPlugin{Impl: srv}},
		},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			pool := pluginv1.BufferPool()
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg),
				experimental.BufferPool(pool), grpc.ForceServerCodecV2(pluginv1.Codec(pool)))...)
		},
	})
}

// server adapts a Plugin to the v1 service.
type server struct {
	pluginv1.UnimplementedPluginServer
	p    Plugin
	kind kind
}

func (s *server) Manifest(context.Context, *pluginv1.ManifestRequest) (*pluginv1.ManifestResponse, error) {
	return &pluginv1.ManifestResponse{Name: s.p.Name, Kind: string(s.kind), Version: s.p.Version, Protocol: pluginv1.ProtocolVersion}, nil
}

func (s *server) Init(ctx context.Context, req *pluginv1.InitRequest) (*pluginv1.InitResponse, error) {
	cfg := req.GetConfigJson()
	if len(cfg) == 0 {
		cfg = []byte("{}")
	}
	if s.p.Init != nil {
		if err := s.p.Init(ctx, cfg); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	return &pluginv1.InitResponse{}, nil
}

func (s *server) Shutdown(ctx context.Context, _ *pluginv1.ShutdownRequest) (*pluginv1.ShutdownResponse, error) {
	if s.p.Close != nil {
		if err := s.p.Close(ctx); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &pluginv1.ShutdownResponse{}, nil
}

func (s *server) Process(ctx context.Context, req *pluginv1.ProcessRequest) (*pluginv1.ProcessResponse, error) {
	op := req.GetOp()
	switch {
	case op == pluginv1.Op_OP_TRANSFORM && s.kind == kindTransform:
		return s.transform(ctx, req.GetRecords())
	case (op == pluginv1.Op_OP_ENCODE || op == pluginv1.Op_OP_DECODE) && s.kind == kindCodec:
		return s.codec(ctx, op, req.GetRecords())
	case op == pluginv1.Op_OP_WRITE && s.kind == kindSink:
		return s.write(ctx, req.GetRecords())
	}
	return nil, status.Errorf(codes.Unimplemented, "plugin %s (%s) does not serve op %s", s.p.Name, s.kind, op)
}

// batchErr is the status of a failed batch. It is never UNAVAILABLE, which
// the host reads as a broken process.
func batchErr(err error) error {
	return status.Error(codes.Aborted, err.Error())
}

func errResult(err error) *pluginv1.Result {
	msg := err.Error()
	if msg == "" {
		msg = "rejected"
	}
	return &pluginv1.Result{Outcome: &pluginv1.Result_Error{Error: msg}}
}

func recordsResult(recs []*pluginv1.Record) *pluginv1.Result {
	return &pluginv1.Result{Outcome: &pluginv1.Result_Records{Records: &pluginv1.Records{Records: recs}}}
}

var keepResult = &pluginv1.Result{Outcome: &pluginv1.Result_Keep{Keep: &pluginv1.Keep{}}}

func (s *server) transform(ctx context.Context, in []*pluginv1.Record) (*pluginv1.ProcessResponse, error) {
	res, err := s.p.Transformer.Transform(ctx, pluginv1.ToRecords(in))
	return response(s.p.Name, "transform", "results", res, err, len(in), func(r Result) *pluginv1.Result {
		switch {
		case r.Err != nil:
			return errResult(r.Err)
		case r.Keep:
			return keepResult
		}
		recs := pluginv1.FromRecords(r.Records)
		for _, x := range recs {
			x.Offset, x.Partition = -1, -1
		}
		return recordsResult(recs)
	})
}

func (s *server) codec(ctx context.Context, op pluginv1.Op, in []*pluginv1.Record) (*pluginv1.ProcessResponse, error) {
	payloads := make([][]byte, len(in))
	for i, r := range in {
		payloads[i] = r.GetValue()
	}
	var res []Payload
	var err error
	if op == pluginv1.Op_OP_ENCODE {
		res, err = s.p.Codec.Encode(ctx, payloads)
	} else {
		res, err = s.p.Codec.Decode(ctx, payloads)
	}
	return response(s.p.Name, "codec", "payloads", res, err, len(in), func(p Payload) *pluginv1.Result {
		if p.Err != nil {
			return errResult(p.Err)
		}
		data := p.Data
		if data == nil {
			data = []byte{}
		}
		return recordsResult([]*pluginv1.Record{{Offset: -1, Partition: -1, TimestampMs: pluginv1.NoTimestamp, Value: data}})
	})
}

func (s *server) write(ctx context.Context, in []*pluginv1.Record) (*pluginv1.ProcessResponse, error) {
	errs, err := s.p.Sink.Write(ctx, pluginv1.ToRecords(in))
	return response(s.p.Name, "sink", "results", errs, err, len(in), func(e error) *pluginv1.Result {
		if e != nil {
			return errResult(e)
		}
		return recordsResult(nil)
	})
}

// response answers a request of n records from plugin's answer res, one
// entry per record (counted in unit) that resultOf turns into its result;
// a failed call, or an answer of another count, fails the batch.
func response[R any](plugin, kind, unit string, res []R, err error, n int, resultOf func(R) *pluginv1.Result) (*pluginv1.ProcessResponse, error) {
	if err != nil {
		return nil, batchErr(err)
	}
	if len(res) != n {
		return nil, status.Errorf(codes.Internal, "plugin %s: %s returned %d %s for %d records", plugin, kind, len(res), unit, n)
	}
	out := &pluginv1.ProcessResponse{Results: make([]*pluginv1.Result, len(res))}
	for i, r := range res {
		out.Results[i] = resultOf(r)
	}
	return out, nil
}

// startCPUProfile profiles the process into path.PID until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid()))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
