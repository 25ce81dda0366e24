package wasm

import (
	"context"
	"errors"
	"fmt"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
)

// Module is a loaded Wasm module as the adapters need it: a
// *runtime.Module, or a *runtime.Watched that swaps in new versions.
type Module interface {
	Manifest() plugins.Manifest
	Call(ctx context.Context, op runtime.Op, recs []record.Record) ([]plugins.Result, error)
	Close(ctx context.Context) error
}

// Open loads the Wasm plugin at path with its own runtime.Host; it is a
// [plugins.OpenFunc]. The result implements the interface of its kind and
// [plugins.Reloader]. opts.Kind, when set, must match. With
// opts.Wasm.Watch > 0 the file is checked that often and reloaded when its
// contents change; a new version is swapped in between batches, and one
// that fails to load, or declares another kind, is logged and the old one
// kept.
func Open(ctx context.Context, path string, opts plugins.Options) (plugins.Plugin, error) {
	h, err := runtime.NewHost(ctx)
	if err != nil {
		return nil, err
	}
	var m Module
	if opts.Wasm.Watch > 0 {
		m, err = h.LoadWatched(ctx, path, opts, opts.Wasm.Watch)
	} else {
		m, err = h.Load(ctx, path, opts)
	}
	if err != nil {
		_ = h.Close(ctx)
		return nil, err
	}
	return adapt(m, h), nil
}

// Adapt wraps a loaded module as the plugin kind it declares. Closing the
// plugin closes the module.
func Adapt(m Module) plugins.Plugin {
	return adapt(m, nil)
}

func adapt(m Module, h *runtime.Host) plugins.Plugin {
	b := base{m: m, h: h}
	switch m.Manifest().Kind {
	case plugins.KindCodec:
		return &codec{b}
	case plugins.KindSink:
		return &sink{b}
	default:
		return &transformer{b}
	}
}

type base struct {
	m Module
	h *runtime.Host // owned, or nil
}

func (b *base) Manifest() plugins.Manifest { return b.m.Manifest() }

// ABI names what the module was written against, as `streamd plugin
// inspect` shows it: "streamd v1", "redpanda data transforms v2", "fluvio
// smartmodule filter (api 22)" (runtime.ABI).
func (b *base) ABI() string {
	if a, ok := b.m.(interface{ ABI() runtime.ABI }); ok {
		return a.ABI().String()
	}
	return ""
}

func (b *base) Close(ctx context.Context) error {
	err := b.m.Close(ctx)
	if b.h != nil {
		err = errors.Join(err, b.h.Close(ctx))
	}
	return err
}

type transformer struct{ base }

// Transform runs one batch through the guest.
func (t *transformer) Transform(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	return t.m.Call(ctx, runtime.OpTransform, batch)
}

type codec struct{ base }

func (c *codec) Encode(ctx context.Context, payloads [][]byte) ([]plugins.Payload, error) {
	return c.run(ctx, runtime.OpEncode, payloads)
}

func (c *codec) Decode(ctx context.Context, payloads [][]byte) ([]plugins.Payload, error) {
	return c.run(ctx, runtime.OpDecode, payloads)
}

func (c *codec) run(ctx context.Context, op runtime.Op, payloads [][]byte) ([]plugins.Payload, error) {
	recs := make([]record.Record, len(payloads))
	for i, p := range payloads {
		recs[i] = record.Record{Value: p, Partition: -1, Offset: -1}
	}
	res, err := c.m.Call(ctx, op, recs)
	if err != nil {
		return nil, err
	}
	out := make([]plugins.Payload, len(res))
	for i, r := range res {
		switch {
		case r.Err != nil:
			out[i].Err = r.Err
		case len(r.Records) != 1:
			return nil, fmt.Errorf("plugin %s: %s: %w: codec answered %d records for payload %d, want 1",
				c.Manifest().Name, op, runtime.ErrBatch, len(r.Records), i)
		default:
			out[i].Data = r.Records[0].Value
		}
	}
	return out, nil
}

type sink struct{ base }

func (s *sink) Write(ctx context.Context, batch []record.Record) ([]error, error) {
	res, err := s.m.Call(ctx, runtime.OpWrite, batch)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(res))
	for i, r := range res {
		errs[i] = r.Err
	}
	return errs, nil
}

var (
	_ plugins.Transformer = (*transformer)(nil)
	_ plugins.Codec       = (*codec)(nil)
	_ plugins.Sink        = (*sink)(nil)
)
