package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// Policy says what happens to a record that a stage or the sink rejects.
type Policy int

// The error policies.
const (
	// PolicyStop fails the pipeline; nothing after the bad record is committed.
	PolicyStop Policy = iota
	// PolicyDrop logs and counts the record, then acknowledges it.
	PolicyDrop
	// PolicyDLQ writes the original input record, with error headers, to the
	// dead-letter sink, then acknowledges it.
	PolicyDLQ
)

// String returns the policy's config name: stop, drop or dlq.
func (p Policy) String() string {
	switch p {
	case PolicyStop:
		return "stop"
	case PolicyDrop:
		return "drop"
	case PolicyDLQ:
		return "dlq"
	}
	return "policy(" + strconv.Itoa(int(p)) + ")"
}

// Headers added to dead-letter records.
const (
	// HeaderError is the first line of the error (at most 4 KiB): its
	// cause, first.
	HeaderError = "streamd-error"
	// HeaderErrorDetail is the rest of a multi-line error (a guest's stack
	// trace), at most 4 KiB; absent when the error is one line.
	HeaderErrorDetail = "streamd-error-detail"
	// HeaderErrorKind is how the record failed: rejected, trap, timeout,
	// memory or failed (ErrorKind).
	HeaderErrorKind       = "streamd-error-kind"
	HeaderStage           = "streamd-stage"
	HeaderPlugin          = "streamd-plugin"
	HeaderSourceTopic     = "streamd-source-topic"
	HeaderSourcePartition = "streamd-source-partition"
	HeaderSourceOffset    = "streamd-source-offset"
)

// failure is why an input record was rejected: by stage number at (or
// the sink, at = len(stages)), named stage.
type failure struct {
	at            int
	stage, plugin string
	err           error
}

// finish takes the sink's answer for pd, applies the error policy and
// acknowledges the batch.
func (p *Pipeline) finish(ctx context.Context, pd *pending) error {
	batch, failed, start := pd.batch, pd.failed, pd.start
	written := 0
	for i, e := range pd.res.errs {
		if e == nil {
			written++
			continue
		}
		if _, bad := failed[pd.from(i)]; !bad {
			if failed == nil {
				failed = map[int]failure{}
			}
			failed[pd.from(i)] = failure{at: len(p.o.stages), stage: SinkStage, err: e}
		}
	}
	if err := p.handleFailures(ctx, batch, failed); err != nil {
		return err
	}
	p.src.Ack(batch)
	p.progress()
	if p.o.commitInterval <= 0 && p.tx == nil {
		if err := p.src.Commit(ctx); err != nil {
			p.o.logger.Warn("commit failed", "pipeline", p.name, "err", err)
		}
	}
	p.release(len(batch))
	p.n.out.Add(int64(written))
	if len(p.obs.batches) > 0 {
		b := BatchDone{Pipeline: p.name, Records: len(batch), Written: written, Rejected: len(failed), Took: time.Since(start)}
		for _, o := range p.obs.batches {
			o.ObserveBatch(b)
		}
	}
	return nil
}

// handleFailures applies the error policy to the rejected input records.
func (p *Pipeline) handleFailures(ctx context.Context, batch []Msg, failed map[int]failure) error {
	if len(failed) == 0 {
		return nil
	}
	idx := make([]int, 0, len(failed))
	for i := range batch {
		// A record marked errNotIsolated has no verdict (isolate):
		// PolicyStop stops at an earlier record, so it is neither counted
		// nor logged.
		if f, ok := failed[i]; ok && !errors.Is(f.err, errNotIsolated) {
			idx = append(idx, i)
		}
	}
	p.n.errors.Add(int64(len(idx)))
	for _, i := range idx {
		f := failed[i]
		r := &batch[i].Record
		kind := ErrorKind(f.err)
		p.n.byStage[f.at].Add(1)
		p.n.byKind[f.at][kindIndex(kind)].Add(1)
		p.o.logger.Warn("record rejected", "pipeline", p.name, "stage", f.stage, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "kind", kind, "err", f.err)
		for _, o := range p.obs.rejects {
			o.ObserveReject(Rejection{Pipeline: p.name, Stage: f.stage, Plugin: f.plugin, Record: r, Err: f.err, Kind: kind, Policy: p.o.policy})
		}
	}
	switch p.o.policy {
	case PolicyStop:
		f := failed[idx[0]]
		r := &batch[idx[0]].Record
		return fmt.Errorf("record %s/%d@%d rejected by %s: %w (error policy: stop)", r.Topic, r.Partition, r.Offset, f.stage, f.err)
	case PolicyDrop:
		p.n.dropped.Add(int64(len(idx)))
		return nil
	}
	dead := make([]record.Record, 0, len(idx))
	for _, i := range idx {
		dead = append(dead, DeadLetter(batch[i].Record, failed[i].stage, failed[i].plugin, failed[i].err))
	}
	// A dead letter the DLQ finds too large (the input was too large for
	// the sink, and the DLQ has the same limit) is sent again without its
	// value, then also without its key and own headers: the error and
	// where the record came from are never lost to a size limit.
	todo := make([]int, len(dead)) // dead[todo[k]] still to write
	for k := range todo {
		todo[k] = k
	}
	for level := 0; len(todo) > 0; level++ {
		recs := make([]record.Record, len(todo))
		keys := make([]partKey, len(todo))
		for k, j := range todo {
			recs[k] = dead[j]
			r := &batch[idx[j]].Record
			keys[k] = partKey{r.Topic, r.Partition}
		}
		first, err := writeOnce(ctx, p.dlq, recs).check("dlq", len(recs))
		if err != nil {
			return err
		}
		errs, err := p.settle(ctx, p.dlq, "dlq", recs, keys, first)
		if err != nil {
			return err
		}
		var again []int
		for k, e := range errs {
			if e == nil {
				continue
			}
			j := todo[k]
			r := &batch[idx[j]].Record
			if errors.Is(e, plugins.ErrRecordTooLarge) && level < 2 {
				p.o.logger.Warn("dead letter too large; sending it truncated", "pipeline", p.name, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
					"drop", []string{"value", "value, key and headers"}[level], "err", e)
				dead[j] = truncateDeadLetter(dead[j], level)
				again = append(again, j)
				continue
			}
			return fmt.Errorf("dead-letter write of %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, e)
		}
		todo = again
	}
	p.n.dlq.Add(int64(len(dead)))
	return nil
}

// Headers of a dead letter that was too large for the dead-letter queue.
const (
	// HeaderTruncated lists what was left out: "value" or "value,key,headers".
	HeaderTruncated = "streamd-truncated"
	// HeaderValueBytes is the length of the value left out.
	HeaderValueBytes = "streamd-value-bytes"
	// HeaderKeyBytes is the length of the key left out.
	HeaderKeyBytes = "streamd-key-bytes"
)

// truncateDeadLetter drops a dead letter's value (level 0), or also its key
// and the input's own headers (level 1), saying so in headers.
func truncateDeadLetter(d record.Record, level int) record.Record {
	if level == 0 {
		d.SetHeader(HeaderValueBytes, []byte(strconv.Itoa(len(d.Value))))
		d.SetHeader(HeaderTruncated, []byte("value"))
		d.Value = nil
		return d
	}
	keep := make([]record.Header, 0, 10)
	for _, h := range d.Headers {
		if strings.HasPrefix(h.Key, "streamd-") {
			keep = append(keep, h)
		}
	}
	d.Headers = keep
	d.SetHeader(HeaderKeyBytes, []byte(strconv.Itoa(len(d.Key))))
	d.SetHeader(HeaderTruncated, []byte("value,key,headers"))
	d.Key = nil
	return d
}

// maxErrorHeader bounds the streamd-error and streamd-error-detail headers
// of a dead letter.
const maxErrorHeader = 4096

// DeadLetter returns the dead-letter record for in: its key, value and
// headers, plus headers saying why (the error's first line, the rest of it
// in streamd-error-detail, each at most 4 KiB and cut with "..." past
// that, and its kind) and where it came from.
func DeadLetter(in record.Record, stage, plugin string, err error) record.Record {
	out := in.Clone()
	out.Topic, out.Offset = "", -1
	first, rest, _ := strings.Cut(err.Error(), "\n")
	out.SetHeader(HeaderError, []byte(cut(strings.TrimRight(first, "\r"), maxErrorHeader)))
	if rest = strings.TrimSpace(rest); rest != "" {
		out.SetHeader(HeaderErrorDetail, []byte(cut(rest, maxErrorHeader)))
	}
	out.SetHeader(HeaderErrorKind, []byte(ErrorKind(err)))
	out.SetHeader(HeaderStage, []byte(stage))
	if plugin != "" {
		out.SetHeader(HeaderPlugin, []byte(plugin))
	}
	out.SetHeader(HeaderSourceTopic, []byte(in.Topic))
	out.SetHeader(HeaderSourcePartition, []byte(strconv.Itoa(int(in.Partition))))
	out.SetHeader(HeaderSourceOffset, []byte(strconv.FormatInt(in.Offset, 10)))
	return out
}

// cut returns s, or its first max-3 bytes (not splitting a UTF-8
// character) and "...".
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
