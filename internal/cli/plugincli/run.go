package plugincli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// RunOptions say how Run drives a plugin.
type RunOptions struct {
	// Op is "encode" or "decode" for a codec; ignored for other kinds.
	Op string
	// Batch is the most records per call (0: pipeline.DefaultMaxRecords,
	// what a pipeline sends).
	Batch int
	// BatchBytes is the most key+value bytes per call (0:
	// pipeline.DefaultMaxBytes); a record larger than that is sent alone.
	BatchBytes int
	// MaxRecordBytes is the Kafka sink's max_record_bytes that a
	// transform's or codec's output records must fit (0:
	// kafka.DefaultMaxRecordBytes; negative: no limit): an input with an
	// output record over it is an error line of kind rejected with the
	// sink's message, as the pipeline's sink refuses it (the input goes
	// to the error policy, none of its outputs is written).
	MaxRecordBytes int
}

// MaxIsolationTimeouts is how many records of one failed batch may time out
// alone before Run stops running that batch's records one by one: a plugin
// that hangs on that many records hangs, whatever the record; a pipeline
// fails there (pipeline.MaxIsolationTimeouts; docs/plugins.md, "Limits").
const MaxIsolationTimeouts = pipeline.MaxIsolationTimeouts

// Summary is what Run did.
type Summary struct {
	In       int            // records given
	Batches  int            // calls with a whole batch
	Isolated int            // batches that failed and were run record by record
	Out      int            // output records (transform, codec) or records written (sink)
	Errors   map[string]int // error lines by kind
	Elapsed  time.Duration
}

// Run feeds recs to p in batches and writes one JSON line per result to w
// (see the package doc). A batch that fails as a whole is run again record
// by record, so that a record that fails alone is an error line of its own,
// with the kind of failure; after MaxIsolationTimeouts records of the batch
// time out alone, the rest of it is not run again and each of its records
// is an error line of kind timeout saying so.
func Run(ctx context.Context, p plugins.Plugin, o RunOptions, recs []record.Record, w io.Writer) (Summary, error) {
	start := time.Now()
	sum := Summary{In: len(recs), Errors: map[string]int{}}
	if o.Batch <= 0 {
		o.Batch = pipeline.DefaultMaxRecords
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = pipeline.DefaultMaxBytes
	}
	call, err := caller(p, o.Op)
	if err != nil {
		return sum, err
	}
	limit := int32(0)
	switch {
	case p.Manifest().Kind == plugins.KindSink || o.MaxRecordBytes < 0:
		limit = -1 // a sink plugin writes where it likes
	case o.MaxRecordBytes > 0:
		limit = int32(min(o.MaxRecordBytes, 1<<30))
	}
	var line []byte
	for next := 0; next < len(recs); {
		end, size := next, 0
		for end < len(recs) && end-next < o.Batch {
			n := len(recs[end].Key) + len(recs[end].Value)
			if end > next && size+n > o.BatchBytes {
				break
			}
			size += n
			end++
		}
		batch := recs[next:end]
		next = end
		sum.Batches++
		res, err := call(ctx, batch)
		if err != nil {
			if ctx.Err() != nil {
				return sum, ctx.Err()
			}
			sum.Isolated++
			if res, err = isolate(ctx, call, batch); err != nil {
				return sum, err
			}
		}
		for i, r := range res {
			in := &batch[i]
			line = line[:0]
			if limit >= 0 && r.err == nil {
				for j := range r.recs {
					if err := kafka.CheckRecordSize(&r.recs[j], limit); err != nil {
						r = outcome{err: err, kind: KindRejected}
						break
					}
				}
			}
			switch {
			case r.err != nil:
				kind := r.kind
				if kind == "" {
					kind = KindRejected
				}
				sum.Errors[kind]++
				line = appendError(line, r.err.Error(), kind, in.Offset)
				line = append(line, '\n')
			case r.written:
				sum.Out++
				line = fmt.Appendf(line, "{\"written\":true,\"input_offset\":%d}\n", in.Offset)
			default:
				for j := range r.recs {
					sum.Out++
					out := r.recs[j]
					out.Topic, out.Partition, out.Offset = in.Topic, in.Partition, in.Offset
					line = record.AppendJSON(line, &out)
					line = append(line, '\n')
				}
			}
			if _, err := w.Write(line); err != nil {
				return sum, err
			}
		}
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// isolate runs a failed batch's records one at a time.
func isolate(ctx context.Context, call callFunc, batch []record.Record) ([]outcome, error) {
	res := make([]outcome, len(batch))
	timeouts := 0
	for i := range batch {
		if timeouts >= MaxIsolationTimeouts {
			res[i] = outcome{kind: KindTimeout, err: fmt.Errorf("not run alone: %d records of this batch timed out alone before it, so the plugin hangs, whatever the record (a pipeline fails here)", timeouts)}
			continue
		}
		one, err := call(ctx, batch[i:i+1])
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// Worded and classified as a pipeline's dead letter is.
			err = pipeline.RecordCallError(err)
			res[i] = outcome{err: err, kind: pipeline.ErrorKind(err)}
			if res[i].kind == KindTimeout {
				timeouts++
			}
			continue
		}
		res[i] = one[0]
	}
	return res, nil
}

type outcome struct {
	recs    []record.Record
	written bool
	err     error
	kind    string // of err: "" is KindRejected
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
			return outcomes(res, err, len(batch), "results", func(_ int, r plugins.Result) outcome {
				return outcome{recs: r.Records, err: r.Err}
			})
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
			return outcomes(res, err, len(batch), "payloads", func(i int, r plugins.Payload) outcome {
				if r.Err != nil {
					return outcome{err: r.Err}
				}
				rec := batch[i]
				rec.Value = r.Data
				return outcome{recs: []record.Record{rec}}
			})
		}, nil
	case plugins.KindSink:
		s, ok := p.(plugins.Sink)
		if !ok {
			return nil, errors.New("sink plugin does not implement plugins.Sink")
		}
		return func(ctx context.Context, batch []record.Record) ([]outcome, error) {
			errs, err := s.Write(ctx, batch)
			return outcomes(errs, err, len(batch), "results", func(_ int, e error) outcome {
				return outcome{written: e == nil, err: e}
			})
		}, nil
	}
	return nil, fmt.Errorf("plugin %s has unknown kind %q", p.Manifest().Name, kind)
}

// outcomes turns a plugin's answer for a batch of n records, one result per
// record, into their outcomes; a call that failed, or an answer with
// another count, fails the batch.
func outcomes[R any](res []R, err error, n int, what string, outcomeOf func(i int, r R) outcome) ([]outcome, error) {
	if err != nil {
		return nil, err
	}
	if len(res) != n {
		return nil, fmt.Errorf("plugin returned %d %s for %d records", len(res), what, n)
	}
	out := make([]outcome, len(res))
	for i, r := range res {
		out[i] = outcomeOf(i, r)
	}
	return out, nil
}
