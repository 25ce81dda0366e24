package plugincli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// RunOptions say how Run drives a plugin.
type RunOptions struct {
	// Op is "encode" or "decode" for a codec; ignored for other kinds.
	Op string
	// Batch is the number of records per call (0: DefaultBatch).
	Batch int
}

// Run feeds recs to p in batches and writes one JSON line per result to w
// (see the package doc). A batch that fails as a whole is retried record by
// record; a record that fails alone is written as an error line.
func Run(ctx context.Context, p plugins.Plugin, o RunOptions, recs []record.Record, w io.Writer) error {
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	call, err := caller(p, o.Op)
	if err != nil {
		return err
	}
	var line []byte
	for start := 0; start < len(recs); start += o.Batch {
		batch := recs[start:min(start+o.Batch, len(recs))]
		res, err := call(ctx, batch)
		if err != nil {
			// Isolate the poison record.
			res = make([]outcome, len(batch))
			for i := range batch {
				one, err := call(ctx, batch[i:i+1])
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					res[i] = outcome{err: err}
					continue
				}
				res[i] = one[0]
			}
		}
		for i, r := range res {
			in := &batch[i]
			line = line[:0]
			switch {
			case r.err != nil:
				line = appendError(line, r.err.Error(), in.Offset)
				line = append(line, '\n')
			case r.written:
				line = fmt.Appendf(line, "{\"written\":true,\"input_offset\":%d}\n", in.Offset)
			default:
				for j := range r.recs {
					out := r.recs[j]
					out.Topic, out.Partition, out.Offset = in.Topic, in.Partition, in.Offset
					line = record.AppendJSON(line, &out)
					line = append(line, '\n')
				}
			}
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
	}
	return nil
}

type outcome struct {
	recs    []record.Record
	written bool
	err     error
}

type callFunc func(ctx context.Context, batch []record.Record) ([]outcome, error)

func caller(p plugins.Plugin, op string) (callFunc, error) {
	kind := p.Manifest().Kind
	if op != "" && kind != plugins.KindCodec {
		return nil, fmt.Errorf("--op %s: plugin %s is a %s, not a codec", op, p.Manifest().Name, kind)
	}
	switch kind {
	case plugins.KindTransform:
		t, ok := p.(plugins.Transformer)
		if !ok {
			return nil, errors.New("transform plugin does not implement plugins.Transformer")
		}
		return func(ctx context.Context, batch []record.Record) ([]outcome, error) {
			res, err := t.Transform(ctx, batch)
			if err != nil {
				return nil, err
			}
			if len(res) != len(batch) {
				return nil, fmt.Errorf("plugin returned %d results for %d records", len(res), len(batch))
			}
			out := make([]outcome, len(res))
			for i, r := range res {
				out[i] = outcome{recs: r.Records, err: r.Err}
			}
			return out, nil
		}, nil
	case plugins.KindCodec:
		c, ok := p.(plugins.Codec)
		if !ok {
			return nil, errors.New("codec plugin does not implement plugins.Codec")
		}
		var f func(context.Context, [][]byte) ([]plugins.Payload, error)
		switch op {
		case "encode":
			f = c.Encode
		case "decode":
			f = c.Decode
		default:
			return nil, fmt.Errorf("plugin %s is a codec: --op must be encode or decode", p.Manifest().Name)
		}
		return func(ctx context.Context, batch []record.Record) ([]outcome, error) {
			payloads := make([][]byte, len(batch))
			for i := range batch {
				payloads[i] = batch[i].Value
			}
			res, err := f(ctx, payloads)
			if err != nil {
				return nil, err
			}
			if len(res) != len(batch) {
				return nil, fmt.Errorf("plugin returned %d payloads for %d records", len(res), len(batch))
			}
			out := make([]outcome, len(res))
			for i, r := range res {
				if r.Err != nil {
					out[i].err = r.Err
					continue
				}
				rec := batch[i]
				rec.Value = r.Data
				out[i].recs = []record.Record{rec}
			}
			return out, nil
		}, nil
	case plugins.KindSink:
		s, ok := p.(plugins.Sink)
		if !ok {
			return nil, errors.New("sink plugin does not implement plugins.Sink")
		}
		return func(ctx context.Context, batch []record.Record) ([]outcome, error) {
			errs, err := s.Write(ctx, batch)
			if err != nil {
				return nil, err
			}
			if len(errs) != len(batch) {
				return nil, fmt.Errorf("plugin returned %d results for %d records", len(errs), len(batch))
			}
			out := make([]outcome, len(errs))
			for i, e := range errs {
				out[i] = outcome{written: e == nil, err: e}
			}
			return out, nil
		}, nil
	}
	return nil, fmt.Errorf("plugin %s has unknown kind %q", p.Manifest().Name, kind)
}
