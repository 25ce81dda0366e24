package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/journal/internal/store"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// QuarantineFunc receives an action record the replicator does not apply,
// and why: a malformed record (the reason wraps ErrMalformed), or an Append
// whose seqNrs are not above its journal's (the reason wraps ErrConflict).
// It must return only once the record is durably kept (produced to a
// quarantine topic, say): replication then goes on past it.
type QuarantineFunc func(ctx context.Context, rec record.Record, reason error) error

// Option configures a Replicator or a Journal.
type Option func(*options)

type options struct {
	logger     *slog.Logger
	quarantine QuarantineFunc
	origin     string
	headCache  bool
	consOpts   []kgo.Opt
}

// WithConsumerOptions adds franz-go options (TLS, SASL, ...) to the
// consumers a Journal starts to read the head of a partition; the seed
// brokers are taken from its client.
func WithConsumerOptions(opts ...kgo.Opt) Option {
	return func(o *options) { o.consOpts = append(o.consOpts, opts...) }
}

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithQuarantine sets where a Replicator sends malformed action records
// and conflicting Appends. Without it they are logged, counted and skipped
// (they stay in the journal topic until its retention removes them).
func WithQuarantine(q QuarantineFunc) Option { return func(o *options) { o.quarantine = q } }

func buildOptions(opts []Option) options {
	o := options{logger: slog.Default(), headCache: true}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// ReplicatorStats are a Replicator's counters since it started.
type ReplicatorStats struct {
	Records     int64 // action records seen
	Skipped     int64 // at or below the stored pointer (redelivered)
	Ignored     int64 // no key, no journal.action header, unknown action
	Quarantined int64 // malformed
	Events      int64 // events written
	Batches     int64 // store transactions
	Conflicts   int64 // Appends not above their journal's seqNr, skipped (see ErrConflict)
}

// Replicator applies journal actions to a Store. It is a plugins.Sink: the
// pipeline engine gives it records of the journal topics (each partition's
// in offset order) and commits offsets once Write reports them durable.
type Replicator struct {
	store *Store
	o     options
	stats struct {
		records, skipped, ignored, quarantined, events, batches, conflicts atomic.Int64
	}
}

var _ plugins.Sink = (*Replicator)(nil)

// NewReplicator returns a Replicator into store.
func NewReplicator(s *Store, opts ...Option) (*Replicator, error) {
	if s == nil {
		return nil, errors.New("journal replicator: nil store")
	}
	return &Replicator{store: s, o: buildOptions(opts)}, nil
}

// Stats returns the counters.
func (r *Replicator) Stats() ReplicatorStats {
	return ReplicatorStats{
		Records: r.stats.records.Load(), Skipped: r.stats.skipped.Load(), Ignored: r.stats.ignored.Load(),
		Quarantined: r.stats.quarantined.Load(), Events: r.stats.events.Load(), Batches: r.stats.batches.Load(),
		Conflicts: r.stats.conflicts.Load(),
	}
}

type partKey struct {
	topic     string
	partition int32
}

// Write implements plugins.Sink. Per partition: records at or below the
// stored pointer are skipped; the rest are decoded, grouped by key,
// folded, applied with the new pointer in one store write. Every record is
// then durable (a malformed one once quarantined). An error (marked
// plugins.Transient: the store or the quarantine failed, never a record)
// means nothing of the batch is known durable; applying it again is safe.
func (r *Replicator) Write(ctx context.Context, batch []record.Record) ([]error, error) {
	var order []partKey
	groups := map[partKey][]int{}
	for i := range batch {
		k := partKey{batch[i].Topic, batch[i].Partition}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, pk := range order {
		if err := r.writePartition(ctx, pk, batch, groups[pk]); err != nil {
			// The store (a full disk, a database down) or the quarantine
			// topic failed, not the records: the whole batch is retried.
			return nil, plugins.Transient(err)
		}
	}
	return make([]error, len(batch)), nil
}

func (r *Replicator) writePartition(ctx context.Context, pk partKey, batch []record.Record, idx []int) error {
	ptr, hasPtr, err := r.store.s.Pointer(ctx, pk.topic, pk.partition)
	if err != nil {
		return err
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(batch[a].Offset, batch[b].Offset) })
	// Decode in parallel (it is most of the CPU), then handle in order.
	type parsed struct {
		id  string
		a   store.Action
		ok  bool
		err error
	}
	res := make([]parsed, len(idx))
	workers := min(runtime.GOMAXPROCS(0), 1+len(idx)/64)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := w; k < len(idx); k += workers {
				rec := &batch[idx[k]]
				if hasPtr && rec.Offset <= ptr {
					continue
				}
				p := &res[k]
				p.id, p.a, p.ok, p.err = parseRecord(rec)
			}
		}(w)
	}
	wg.Wait()
	per := map[string][]store.Action{}
	var ids []string
	newPtr, any := ptr, false
	// Counted once per batch, not with an atomic add per record.
	var seen, skipped, ignored, quarantined int64
	defer func() {
		r.stats.records.Add(seen)
		r.stats.skipped.Add(skipped)
		r.stats.ignored.Add(ignored)
		r.stats.quarantined.Add(quarantined)
	}()
	for k, i := range idx {
		rec := &batch[i]
		seen++
		if hasPtr && rec.Offset <= ptr {
			skipped++
			continue
		}
		if !any || rec.Offset > newPtr {
			newPtr, any = rec.Offset, true
		}
		p := res[k]
		if p.err != nil {
			quarantined++
			if qerr := r.quarantine(ctx, rec, p.err); qerr != nil {
				return qerr
			}
			continue
		}
		if !p.ok {
			ignored++
			continue
		}
		if _, seen := per[p.id]; !seen {
			ids = append(ids, p.id)
		}
		per[p.id] = append(per[p.id], p.a)
	}
	if !any {
		return nil
	}
	b := &store.Batch{Topic: pk.topic, Partition: pk.partition, Pointer: newPtr}
	n := 0
	for _, id := range ids {
		ops := store.Fold(pk.partition, per[id])
		for _, op := range ops {
			for _, p := range op.Parts {
				n += len(p.Events)
			}
		}
		b.Keys = append(b.Keys, store.KeyOps{ID: id, Ops: ops})
	}
	// Appends not above their journal's seqNr are found inside the store's
	// transaction; they are quarantined there (before the pointer passes
	// them), and logged and counted once the batch is committed.
	var conflicts []store.Conflict
	b.OnConflict = func(ctx context.Context, cs []store.Conflict) error {
		conflicts = cs
		if r.o.quarantine == nil {
			return nil
		}
		for _, c := range cs {
			k, found := slices.BinarySearchFunc(idx, c.Offset, func(i int, off int64) int { return cmp.Compare(batch[i].Offset, off) })
			if !found {
				return fmt.Errorf("journal replicator: conflicting append at %s/%d@%d is not in the batch", pk.topic, pk.partition, c.Offset)
			}
			rec := batch[idx[k]]
			if err := r.o.quarantine(ctx, rec, conflictReason(c)); err != nil {
				return fmt.Errorf("journal replicator: quarantine %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
			}
		}
		return nil
	}
	if err := r.store.s.Apply(ctx, b); err != nil {
		return err
	}
	for _, c := range conflicts {
		n -= c.Events
		r.o.logger.Warn("journal: append not above the journal's seqNr skipped (another writer's append came first)",
			"topic", pk.topic, "partition", pk.partition, "offset", c.Offset, "id", c.ID,
			"from", c.From, "to", c.To, "journal_seqNr", c.SeqNr)
	}
	r.stats.conflicts.Add(int64(len(conflicts)))
	r.stats.batches.Add(1)
	r.stats.events.Add(int64(n))
	return nil
}

func conflictReason(c store.Conflict) error {
	return fmt.Errorf("%w: append %d..%d of journal %q is not above its seqNr %d: skipped, its events were not stored", ErrConflict, c.From, c.To, c.ID, c.SeqNr)
}

func (r *Replicator) quarantine(ctx context.Context, rec *record.Record, reason error) error {
	r.o.logger.Warn("journal: malformed action record quarantined",
		"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "reason", reason)
	if r.o.quarantine == nil {
		return nil
	}
	if err := r.o.quarantine(ctx, *rec, reason); err != nil {
		return fmt.Errorf("journal replicator: quarantine %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	return nil
}

// QuarantineHeaders are added to a quarantined record by
// QuarantineRecord: why, and where it came from.
const (
	QuarantineReasonHeader    = "journal.quarantine.reason"
	QuarantineTopicHeader     = "journal.quarantine.topic"
	QuarantinePartitionHeader = "journal.quarantine.partition"
	QuarantineOffsetHeader    = "journal.quarantine.offset"
)

// QuarantineRecord returns rec as it goes to a quarantine topic: same key,
// value and headers, plus headers naming the reason and the origin.
func QuarantineRecord(rec record.Record, reason error, topic string) record.Record {
	q := rec.Clone()
	q.Topic, q.Partition, q.Offset = topic, 0, 0
	q.Headers = append(q.Headers,
		record.Header{Key: QuarantineReasonHeader, Value: []byte(reason.Error())},
		record.Header{Key: QuarantineTopicHeader, Value: []byte(rec.Topic)},
		record.Header{Key: QuarantinePartitionHeader, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		record.Header{Key: QuarantineOffsetHeader, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
	)
	return q
}

// parseRecord decodes an action record. ok is false for a record a
// consumer skips (no key, no journal.action header, an unknown action, an
// Append with a null value); err (wrapping ErrMalformed) for a malformed one.
func parseRecord(rec *record.Record) (id string, a store.Action, ok bool, err error) {
	if rec.Key == nil {
		return "", a, false, nil
	}
	hv, has := rec.Header(action.HeaderKey)
	if !has {
		return "", a, false, nil
	}
	h, err := action.DecodeHeader(hv)
	if err != nil {
		return "", a, false, err
	}
	if h.Kind == action.KindUnknown {
		return "", a, false, nil
	}
	if err := checkID(string(rec.Key)); err != nil {
		return "", a, false, fmt.Errorf("%w: journal id (the record key): %w", action.ErrMalformed, err)
	}
	a = store.Action{Header: h, Offset: rec.Offset, Timestamp: rec.Timestamp}
	if h.Kind == action.KindAppend {
		if rec.Value == nil {
			return "", a, false, nil
		}
		ev, err := action.DecodePayload(h.PayloadType, rec.Value)
		if err != nil {
			return "", a, false, err
		}
		if err := checkRange(h, ev); err != nil {
			return "", a, false, err
		}
		a.Events = ev
		for _, x := range rec.Headers {
			if x.Key == action.HeaderKey {
				continue
			}
			if a.Headers == nil {
				a.Headers = map[string]string{}
			}
			a.Headers[x.Key] = string(x.Value)
		}
	}
	return string(rec.Key), a, true, nil
}

// ErrMalformed is wrapped by every error about a malformed action record.
var ErrMalformed = action.ErrMalformed

func checkRange(h action.Header, ev *action.Events) error {
	prev := int64(0)
	for _, e := range ev.Events {
		if e.SeqNr <= prev {
			return fmt.Errorf("%w: append: event seqNrs not increasing (%d after %d)", action.ErrMalformed, e.SeqNr, prev)
		}
		prev = e.SeqNr
	}
	first, last := ev.Events[0].SeqNr, ev.Events[len(ev.Events)-1].SeqNr
	if first != h.From || last != h.To {
		return fmt.Errorf("%w: append: header range %d..%d but events %d..%d", action.ErrMalformed, h.From, h.To, first, last)
	}
	return nil
}
