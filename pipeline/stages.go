package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/streamd/streamd/internal/x/wait"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// Stage is one transform stage.
type Stage struct {
	// Name identifies the stage in metrics, logs and the streamd-stage header.
	Name string
	// Transformer does the work.
	Transformer plugins.Transformer
	// Plugin is the plugin's name for the streamd-plugin header, if any.
	Plugin string
}

// prepare drops stale records and runs the stages; nil means nothing is
// left to do.
func (p *Pipeline) prepare(ctx context.Context, batch []Msg) (*pending, error) {
	start := time.Now()
	if live, checked := p.filterLive(batch); checked {
		if dropped := len(batch) - len(live); dropped > 0 {
			p.release(dropped)
			p.n.dropped.Add(int64(dropped))
			p.o.logger.Debug("dropped records of a revoked partition", "pipeline", p.name, "n", dropped)
		}
		batch = live
		if len(batch) == 0 {
			return nil, nil
		}
	}

	if p.msgs != nil {
		// No stage, and a sink that reads the records in the batch
		// itself: nothing to copy.
		return &pending{start: start, batch: batch, direct: true}, nil
	}
	recs := make([]record.Record, len(batch))
	for i := range batch {
		recs[i] = batch[i].Record
	}
	var origin []int           // recs[i] came from batch[origin[i]]; nil while that is i
	var failed map[int]failure // allocated on the first failure
	for si, st := range p.o.stages {
		results, err := p.transform(ctx, st, recs)
		if err != nil {
			return nil, err
		}
		if oneToOne(results, recs, origin, failed) {
			// One output per input and none failed (the usual answer,
			// KEEP or a changed record): the outputs take the inputs'
			// places, and the origins stay as they are.
			for i := range results {
				recs[i] = results[i].Records[0]
			}
			continue
		}
		if origin == nil {
			origin = make([]int, len(recs))
			for i := range origin {
				origin[i] = i
			}
		}
		next := make([]record.Record, 0, len(results))
		nextOrigin := make([]int, 0, len(results))
		for i, r := range results {
			o := origin[i]
			if _, bad := failed[o]; bad {
				continue
			}
			if r.Err != nil {
				if failed == nil {
					failed = map[int]failure{}
				}
				failed[o] = failure{at: si, stage: st.Name, plugin: st.Plugin, err: r.Err}
				continue
			}
			for _, out := range r.Records {
				next = append(next, out)
				nextOrigin = append(nextOrigin, o)
			}
		}
		recs, origin = next, nextOrigin
	}
	// Outputs of an input that failed anywhere are withheld: the input goes
	// to the error policy whole.
	if len(failed) > 0 {
		keep := recs[:0:0]
		var keepOrigin []int
		for i := range recs {
			if _, bad := failed[origin[i]]; !bad {
				keep = append(keep, recs[i])
				keepOrigin = append(keepOrigin, origin[i])
			}
		}
		recs, origin = keep, keepOrigin
	}
	return &pending{start: start, batch: batch, recs: recs, origin: origin, failed: failed}, nil
}

// oneToOne reports whether results, a stage's answer for recs, hold exactly
// one record per input, none of an input that failed at an earlier stage,
// and none that is another element of recs than its own input (a KEEP
// answer is recs[i:i+1] itself): then the outputs can be written over
// recs in place, in order, without changing a record still to be read.
func oneToOne(results []plugins.Result, recs []record.Record, origin []int, failed map[int]failure) bool {
	if len(results) != len(recs) || len(recs) == 0 {
		return false
	}
	first := uintptr(unsafe.Pointer(&recs[0]))
	end := first + uintptr(len(recs))*unsafe.Sizeof(recs[0])
	for i := range results {
		r := &results[i]
		if r.Err != nil || len(r.Records) != 1 {
			return false
		}
		if at := uintptr(unsafe.Pointer(&r.Records[0])); at >= first && at < end && at != uintptr(unsafe.Pointer(&recs[i])) {
			return false
		}
		if failed != nil {
			o := i
			if origin != nil {
				o = origin[i]
			}
			if _, bad := failed[o]; bad {
				return false
			}
		}
	}
	return true
}

// transform runs recs through st: one Result per record, or an error that
// fails the pipeline. A batch error marked plugins.Transient retries the
// batch; any other batch error runs the records one by one so that only a
// poison record fails. A Result whose Err is transient retries that
// record. Retries back off as sink writes do, until ctx is done or
// retry_attempts is used up.
func (p *Pipeline) transform(ctx context.Context, st Stage, recs []record.Record) ([]plugins.Result, error) {
	var out []plugins.Result // made when a first answer has a transient error
	todo := recs
	var idx []int // todo[i] is recs[idx[i]]; nil: todo is recs
	backoff := p.o.retryInitial
	for attempt := 1; ; attempt++ {
		res, err := p.call(ctx, st, todo)
		if err == nil && len(res) != len(todo) {
			err = fmt.Errorf("stage returned %d results for %d records", len(res), len(todo))
		}
		if err != nil && !errors.Is(err, plugins.ErrTransient) {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("stage %s: %w", st.Name, err)
			}
			if herr := stageHealth(st); herr != nil {
				// A broken plugin fails every record: that is not the
				// records' fault, so nothing goes to the error policy.
				return nil, fmt.Errorf("stage %s: %w (batch error: %v)", st.Name, herr, err)
			}
			p.o.logger.Warn("batch failed; retrying its records one by one", "pipeline", p.name, "stage", st.Name, "records", len(todo), "err", err)
			if res, err = p.isolate(ctx, st, todo); err != nil {
				return nil, err
			}
		}
		cause := err // transient batch error, or nil
		if cause == nil && out == nil && !anyTransient(res) {
			return res, nil // the first answer, for every record: as it is
		}
		if out == nil {
			out = make([]plugins.Result, len(recs))
		}
		if cause == nil {
			var next []record.Record
			var nextIdx []int
			for i := range res {
				j := i
				if idx != nil {
					j = idx[i]
				}
				if res[i].Err != nil && errors.Is(res[i].Err, plugins.ErrTransient) {
					if cause == nil {
						cause = res[i].Err
					}
					next = append(next, todo[i])
					nextIdx = append(nextIdx, j)
					continue
				}
				out[j] = res[i]
			}
			if cause == nil {
				return out, nil
			}
			todo, idx = next, nextIdx
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("stage %s: %w", st.Name, cause)
		}
		if p.o.retryAttempts > 0 && attempt >= p.o.retryAttempts {
			return nil, fmt.Errorf("stage %s failed after %d attempts: %w", st.Name, attempt, cause)
		}
		p.noteRetry("stage "+st.Name, len(todo), attempt, backoff, cause)
		if wait.Sleep(ctx, backoff) != nil {
			return nil, fmt.Errorf("stage %s: %w", st.Name, cause)
		}
		backoff = min(backoff*2, p.o.retryMax)
	}
}

// anyTransient reports whether a Result of res has a transient error.
func anyTransient(res []plugins.Result) bool {
	for i := range res {
		if res[i].Err != nil && errors.Is(res[i].Err, plugins.ErrTransient) {
			return true
		}
	}
	return false
}

// isolate runs a failed batch's records one at a time, so that only the
// poison record fails. A record that fails transiently alone gets a
// transient Result.Err, which transform retries.
//
// Each record that fails alone can cost a whole call timeout (a guest that
// hangs), so isolation is bounded (docs/plugins.md, "A batch that fails"):
// under PolicyStop it ends at the first record that fails alone, the rest
// marked errNotIsolated (the pipeline stops at that record: they are
// neither written nor acknowledged); and the MaxIsolationTimeouts-th record
// that times out alone (plugins.ErrTimeout) fails the stage: a plugin that
// hangs on that many records of one batch hangs whatever the record, which
// is no verdict on the records. So a batch costs at most its own call plus
// MaxIsolationTimeouts timed-out calls, not one per record.
func (p *Pipeline) isolate(ctx context.Context, st Stage, recs []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(recs))
	timeouts := 0
	for i := range recs {
		res, err := p.call(ctx, st, recs[i:i+1])
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("stage %s: %w", st.Name, err)
			}
			if herr := stageHealth(st); herr != nil {
				return nil, fmt.Errorf("stage %s: %w (record error: %v)", st.Name, herr, err)
			}
			if errors.Is(err, plugins.ErrTimeout) && !errors.Is(err, plugins.ErrTransient) {
				if timeouts++; timeouts >= MaxIsolationTimeouts {
					return nil, fmt.Errorf("stage %s: plugin %s timed out on %d records of one batch alone: the plugin hangs, whatever the record; no record of the batch is given a verdict or acknowledged: %w",
						st.Name, st.Plugin, timeouts, err)
				}
			}
			out[i] = plugins.Result{Err: RecordCallError(err)}
		case len(res) != 1:
			out[i] = plugins.Result{Err: fmt.Errorf("stage returned %d results for 1 record", len(res))}
		default:
			out[i] = res[0]
		}
		if e := out[i].Err; e != nil && !errors.Is(e, plugins.ErrTransient) && p.o.policy == PolicyStop {
			for j := i + 1; j < len(recs); j++ {
				out[j] = plugins.Result{Err: errNotIsolated}
			}
			break
		}
	}
	return out, nil
}

// MaxIsolationTimeouts is how many records of one failed batch may time out
// alone (plugins.ErrTimeout) before the stage fails (see isolate).
const MaxIsolationTimeouts = 2

// errNotIsolated marks the records after the one a PolicyStop pipeline
// stops at: they were not run alone, so they have no verdict; they are
// withheld from the sink and not counted as rejected.
var errNotIsolated = errors.New("not run alone: the pipeline stops at an earlier record of the batch")

// call calls st's Transformer once, and tells the stage observers about
// the call. With no observer it costs nothing more than the call.
func (p *Pipeline) call(ctx context.Context, st Stage, recs []record.Record) ([]plugins.Result, error) {
	if len(p.obs.stages) == 0 {
		return st.Transformer.Transform(ctx, recs)
	}
	start := time.Now()
	res, err := st.Transformer.Transform(ctx, recs)
	c := StageCall{Pipeline: p.name, Stage: st.Name, In: recs, Out: res, Err: err, Took: time.Since(start)}
	if err != nil {
		c.Out = nil
	}
	for _, o := range p.obs.stages {
		o.ObserveStage(c)
	}
	return res, err
}
