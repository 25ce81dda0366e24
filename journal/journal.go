package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/x/jsonscan"
	"github.com/streamd/streamd/internal/x/kgox"
	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/journal/internal/store"
	"github.com/streamd/streamd/record"
)

// ErrInvalid is wrapped by errors about a bad request: no events,
// seqNrs not increasing, a payload that is not what its type says.
var ErrInvalid = errors.New("invalid journal request")

// Journal reads and writes journals on Kafka and a Store. It is safe for
// concurrent use.
type Journal struct {
	client   *kgo.Client
	store    *Store
	o        options
	consOpts []kgo.Opt
	cache    *headCache
	// afterMark, if set, runs after a Mark is produced (tests use it to let
	// a replicator catch up at exactly that point).
	afterMark func()
	writers   writers
	own       ownLog
	maxRecord int32    // the producer's per-record limit
	topics    sync.Map // topic -> time.Time it was found to exist
	stats     struct {
		views, storeOnly, kafkaReads, cacheHits atomic.Int64
		appends, conflicts, checkReads          atomic.Int64
		headRecords, checkLocal                 atomic.Int64
	}
}

// JournalStats are a Journal's counters since it was made.
type JournalStats struct {
	// Views is how many Read, Pointer and Delete calls looked at a journal.
	Views int64
	// StoreOnly is how many of them the store answered alone (its pointer
	// was at or past the Mark).
	StoreOnly int64
	// KafkaReads is how many read the partition's unreplicated head from
	// Kafka.
	KafkaReads int64
	// CacheHits is how many were answered by the head cache.
	CacheHits int64
	// Appends is how many Appends were written and accepted.
	Appends int64
	// Conflicts is how many Appends were refused with ErrConflict (written
	// to Kafka or not).
	Conflicts int64
	// CheckReads is how many accepted or refused Appends read Kafka (not
	// the head cache) to learn whether they were accepted.
	CheckReads int64
	// CheckLocal is how many Appends learnt whether they were accepted
	// without reading anything: every record from their base to them was
	// this Journal's.
	CheckLocal int64
	// HeadRecords is how many records reads of the head from Kafka (by
	// views and Append checks, not the head cache) consumed.
	HeadRecords int64
}

// Stats returns the counters.
func (j *Journal) Stats() JournalStats {
	return JournalStats{Views: j.stats.views.Load(), StoreOnly: j.stats.storeOnly.Load(), KafkaReads: j.stats.kafkaReads.Load(), CacheHits: j.stats.cacheHits.Load(),
		Appends: j.stats.appends.Load(), Conflicts: j.stats.conflicts.Load(), CheckReads: j.stats.checkReads.Load(),
		HeadRecords: j.stats.headRecords.Load(), CheckLocal: j.stats.checkLocal.Load()}
}

// WithOrigin sets the origin written in every action header (default: the
// host name).
func WithOrigin(origin string) Option { return func(o *options) { o.origin = origin } }

// WithoutHeadCache turns the head cache off: every read that the store
// cannot answer alone reads Kafka.
func WithoutHeadCache() Option { return func(o *options) { o.headCache = false } }

// New returns a Journal that produces with client and reads with store.
//
// client must produce with acks=all and idempotence (franz-go's defaults)
// and partition keyed records with Kafka's murmur2 (franz-go's default
// partitioner), so the actions of an id go where kafka-journal puts them.
// Reading the unreplicated head of a partition uses separate consumers on
// the same seed brokers; extra options for those (TLS, SASL) can be given
// with WithConsumerOptions.
func New(client *kgo.Client, s *Store, opts ...Option) *Journal {
	o := buildOptions(opts)
	if o.origin == "" {
		o.origin, _ = os.Hostname()
	}
	j := &Journal{client: client, store: s, o: o, maxRecord: 1000012}
	if v, ok := client.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok && v > 0 {
		j.maxRecord = v
	}
	for _, v := range client.OptValues(kgo.SeedBrokers) {
		if seeds, ok := v.([]string); ok {
			j.consOpts = append(j.consOpts, kgo.SeedBrokers(seeds...))
		}
	}
	j.consOpts = append(j.consOpts, o.consOpts...)
	if o.headCache && s.readable {
		j.cache = newHeadCache(j)
	}
	return j
}

// Close stops the head cache's consumers, returning when ctx is done at
// the latest. It does not close the client or the store.
func (j *Journal) Close(ctx context.Context) error {
	if j.cache != nil {
		return j.cache.close(ctx)
	}
	return nil
}

// AppendOption configures one Append.
type AppendOption func(*appendConfig)

type appendConfig struct {
	expireAfter time.Duration
	metadata    json.RawMessage
	headers     map[string]string
}

// ExpireAfter makes the journal expire (be purged by the replicator's
// expiry job) d after this append, unless a later append says otherwise.
func ExpireAfter(d time.Duration) AppendOption {
	return func(c *appendConfig) { c.expireAfter = d }
}

// Metadata attaches a JSON value to the append (kafka-journal's metadata
// data, in both the header and the payload).
func Metadata(v json.RawMessage) AppendOption { return func(c *appendConfig) { c.metadata = v } }

// Headers adds Kafka headers to the append record.
func Headers(h map[string]string) AppendOption { return func(c *appendConfig) { c.headers = h } }

// Append writes events, atomically, as one Append action, and returns
// where it was written. Events must be non-empty with increasing seqNrs.
//
// The journal accepts an Append only if its first seqNr is above the
// journal's seqNr and deleteTo (any seqNr starts a journal that does not
// exist, or was purged); the order that counts is the order of the actions
// in the journal's Kafka partition. Append returns nil only for an accepted
// Append: readers and the replicator then keep every one of its events
// until a Delete or a Purge removes them. Otherwise it returns a
// *ConflictError (wrapping ErrConflict) with the journal's seqNr: either it
// knew before writing (nothing is written), or another writer's action came
// first in the partition (the Append was written, and every reader and the
// replicator ignore it). Appends of one Journal to one journal run one at a
// time. An error other than these may leave the outcome unknown (see
// ErrUnverified).
func (j *Journal) Append(ctx context.Context, key Key, events []Event, opts ...AppendOption) (Position, error) {
	var c appendConfig
	for _, o := range opts {
		o(&c)
	}
	if err := key.check(); err != nil {
		return Position{}, err
	}
	if len(events) == 0 {
		return Position{}, fmt.Errorf("journal %s: append: no events: %w", key, ErrInvalid)
	}
	ev := &action.Events{Metadata: action.Metadata{ExpireAfter: c.expireAfter}}
	if c.metadata != nil {
		if !jsonscan.Valid(c.metadata) {
			return Position{}, fmt.Errorf("journal %s: append: metadata is not valid JSON: %w", key, ErrInvalid)
		}
		ev.Metadata.Data = c.metadata
	}
	prev := int64(0)
	for _, e := range events {
		if e.SeqNr <= prev {
			return Position{}, fmt.Errorf("journal %s: append: seqNr %d after %d: seqNrs must be >= 1 and increasing: %w", key, e.SeqNr, prev, ErrInvalid)
		}
		prev = e.SeqNr
		k, err := kindOf(e.PayloadType)
		if err != nil {
			return Position{}, fmt.Errorf("journal %s: append: event %d: %w: %w", key, e.SeqNr, err, ErrInvalid)
		}
		if k == action.PayloadJSON && !jsonscan.Valid(e.Payload) {
			return Position{}, fmt.Errorf("journal %s: append: event %d: payload is not valid JSON: %w", key, e.SeqNr, ErrInvalid)
		}
		ev.Events = append(ev.Events, action.Event{SeqNr: e.SeqNr, Tags: e.Tags, Kind: k, Payload: e.Payload})
	}
	value, format, err := action.EncodePayload(ev)
	if err != nil {
		return Position{}, fmt.Errorf("journal %s: append: %w", key, err)
	}
	h := action.Header{Kind: action.KindAppend, From: events[0].SeqNr, To: prev, Origin: j.o.origin, PayloadType: format, Metadata: c.metadata}
	var extra []kgo.RecordHeader
	for k, v := range c.headers {
		if k == action.HeaderKey {
			return Position{}, fmt.Errorf("journal %s: append: header %q is reserved: %w", key, k, ErrInvalid)
		}
		extra = append(extra, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	if _, err := j.record(key, h, value, extra); err != nil {
		return Position{}, err
	}
	w := j.writers.acquire(key)
	defer j.writers.release(key, w)
	pos, err := j.appendChecked(ctx, key, w, h, value, extra)
	if errors.Is(err, ErrConflict) {
		j.stats.conflicts.Add(1)
	} else if err == nil {
		j.stats.appends.Add(1)
	}
	return pos, err
}

// ErrConflict is wrapped by the error of an Append that the journal
// refuses because its first seqNr is not above the journal's seqNr and
// deleteTo (a *ConflictError).
var ErrConflict = errors.New("journal append conflict")

// ConflictError is the error of a refused Append.
type ConflictError struct {
	Key Key
	// From and To are the refused Append's first and last seqNr.
	From, To int64
	// SeqNr is what From had to exceed: the journal's seqNr (or deleteTo,
	// if higher) when the Append came.
	SeqNr int64
	// Written is true if the Append was written to Kafka before another
	// writer's action was found ahead of it, at Position; every reader and
	// the replicator ignore it there (the replicator reports it as a
	// conflict).
	Written  bool
	Position Position
}

func (e *ConflictError) Error() string {
	s := fmt.Sprintf("journal %s: append %d..%d refused: seqNrs must be above the journal's seqNr %d", e.Key, e.From, e.To, e.SeqNr)
	if e.Written {
		s += fmt.Sprintf(" (another writer's action came first; the append written at %d/%d is void)", e.Position.Partition, e.Position.Offset)
	}
	return s
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ErrUnverified is wrapped by the error of an Append that was written to
// Kafka but whose acceptance could not be checked (the context ended, or
// reading the partition failed): it may or may not be part of the journal;
// Pointer or Read tell.
var ErrUnverified = errors.New("journal append written but not verified")

// appendChecked writes the Append and tells whether the journal accepted
// it. w is held.
func (j *Journal) appendChecked(ctx context.Context, key Key, w *writer, h action.Header, value []byte, extra []kgo.RecordHeader) (Position, error) {
	// The state the Append lands on is the journal's after every action
	// before it in the partition: the store's row at the store's pointer,
	// or the state this Journal last learnt (prev, when newer), plus the
	// actions after that. The store's part is read now, in one snapshot,
	// before writing, unless every record after prev is known to be this
	// Journal's (one process writing the topic): then prev is as good.
	prev, prevAt, havePrev := w.state, w.asOf, w.known
	w.known = false // until this Append's fold gives the state after it
	var (
		stored    store.Head
		ptrs      map[int32]int64
		haveStore bool
		err       error
	)
	if !havePrev || !j.own.onlyOurs(key.Topic, prevAt.Partition, prevAt.Offset+1) {
		if stored, ptrs, err = j.storeState(ctx, key); err != nil {
			return Position{}, err
		}
		haveStore = true
	}
	if haveStore && !store.Accepts(stored.Exists, stored.SeqNr, stored.DeleteTo, h.From) ||
		havePrev && !store.Accepts(prev.Exists, prev.SeqNr, prev.DeleteTo, h.From) {
		// Probably a conflict: make sure, with a view up to a Mark, so that a
		// refused Append is not written at all (a Purge since could make it
		// right).
		v, err := j.view(ctx, key)
		if err != nil {
			return Position{}, err
		}
		v.close()
		prev, prevAt, havePrev = v.head, v.mark, true
		w.state, w.asOf, w.known = prev, prevAt, true
		if !store.Accepts(v.head.Exists, v.head.SeqNr, v.head.DeleteTo, h.From) {
			return Position{}, &ConflictError{Key: key, From: h.From, To: h.To, SeqNr: v.head.Cur()}
		}
		w.known = false
		stored, ptrs, haveStore = v.stored, map[int32]int64{}, true
		if v.hasPtr {
			ptrs[v.mark.Partition] = v.ptr
		}
	}
	pos, err := j.produce(ctx, key, h, value, extra)
	if err != nil {
		return Position{}, err
	}
	// Fold the journal's actions from the base up to the Append, then the
	// Append itself: the fold the replicator and every reader apply.
	prevOK := havePrev && prevAt.Partition == pos.Partition && prevAt.Offset < pos.Offset
	var (
		acts   []headAction
		local  bool
		base   store.Head
		baseAt int64
	)
	if prevOK {
		base, baseAt = prev, prevAt.Offset
		acts, local = j.own.actions(ctx, key.Topic, pos.Partition, key.ID, baseAt+1, pos.Offset)
	}
	if !local {
		if !haveStore {
			if stored, ptrs, err = j.storeState(ctx, key); err != nil {
				return pos, j.unverified(key, h, pos, err)
			}
		}
		storeAt, hasStore := ptrs[pos.Partition]
		if !hasStore {
			storeAt = -1
		}
		switch {
		case storeAt < pos.Offset && (!prevOK || storeAt > prevAt.Offset):
			base, baseAt = stored, storeAt
			acts, local = j.own.actions(ctx, key.Topic, pos.Partition, key.ID, baseAt+1, pos.Offset)
		case !prevOK:
			// No state before the Append (the topic grew partitions since the
			// store's row was read).
			return pos, j.unverified(key, h, pos, errors.New("no state of the journal before the append"))
		}
		if !local {
			var cached bool
			if acts, cached, err = j.headActions(ctx, key, pos, baseAt+1, max(0, min(storeAt+1, baseAt+1))); err != nil {
				return pos, j.unverified(key, h, pos, err)
			}
			if !cached {
				j.stats.checkReads.Add(1)
			}
		}
	}
	if local {
		j.stats.checkLocal.Add(1)
	}
	head := base
	for _, a := range acts {
		if a.offset != pos.Offset {
			head.Apply(a.header, a.offset)
			continue
		}
		before := head.Cur()
		accepted := head.Apply(a.header, a.offset)
		w.state, w.asOf, w.known = head, pos, true
		if !accepted {
			return pos, &ConflictError{Key: key, From: h.From, To: h.To, SeqNr: before, Written: true, Position: pos}
		}
		return pos, nil
	}
	return pos, j.unverified(key, h, pos, fmt.Errorf("the append is not in the partition up to its own offset"))
}

func (j *Journal) unverified(key Key, h action.Header, pos Position, err error) error {
	return fmt.Errorf("journal %s: append %d..%d written at %d/%d: %w: %w", key, h.From, h.To, pos.Partition, pos.Offset, ErrUnverified, err)
}

// storeState returns the journal's row in the store as a Head, and the
// topic's partition pointers, from one snapshot (an empty Head and no
// pointers for a store that cannot be read).
func (j *Journal) storeState(ctx context.Context, key Key) (store.Head, map[int32]int64, error) {
	if !j.store.readable {
		return store.NewHead(store.Meta{}, false), nil, nil
	}
	snap, err := j.store.s.Snapshot(ctx)
	if err != nil {
		return store.Head{}, nil, err
	}
	defer func() { _ = snap.Close() }()
	m, ok, err := snap.Meta(ctx, store.Key{Topic: key.Topic, ID: key.ID})
	if err != nil {
		return store.Head{}, nil, err
	}
	ptrs, err := snap.Pointers(ctx, key.Topic)
	if err != nil {
		return store.Head{}, nil, err
	}
	return store.NewHead(m, ok), ptrs, nil
}

// headActions returns key's actions at offsets start..until.Offset of
// until's partition, from the head cache if there is one (cached true) or
// from Kafka. stored is the store's pointer + 1: what is below it is
// replicated, and the cache may drop it.
func (j *Journal) headActions(ctx context.Context, key Key, until Position, start, stored int64) (acts []headAction, cached bool, err error) {
	if j.cache != nil {
		return j.cache.actions(ctx, key, until, start, stored)
	}
	acts, err = j.readHead(ctx, key, until, start)
	return acts, false, err
}

// Purge removes the whole journal: the next Append starts a new one.
func (j *Journal) Purge(ctx context.Context, key Key) (Position, error) {
	if err := key.check(); err != nil {
		return Position{}, err
	}
	return j.produce(ctx, key, action.Header{Kind: action.KindPurge, Origin: j.o.origin}, nil, nil)
}

// Delete deletes the events up to to (never future ones): it computes the
// journal's pointer first, writes nothing if there is no journal (ok
// false), else Delete(min(to, pointer)).
func (j *Journal) Delete(ctx context.Context, key Key, to int64) (pos Position, ok bool, err error) {
	if to < 1 {
		return Position{}, false, fmt.Errorf("journal %s: delete: to %d < 1: %w", key, to, ErrInvalid)
	}
	seqNr, _, err := j.Pointer(ctx, key)
	if err != nil {
		return Position{}, false, err
	}
	if seqNr == 0 {
		return Position{}, false, nil
	}
	pos, err = j.produce(ctx, key, action.Header{Kind: action.KindDelete, To: min(to, seqNr), Origin: j.o.origin}, nil, nil)
	return pos, err == nil, err
}

// Pointer returns the journal's last seqNr, or 0 if there is no journal
// (never written, or purged), and where its Mark was written.
func (j *Journal) Pointer(ctx context.Context, key Key) (seqNr int64, mark Position, err error) {
	v, err := j.view(ctx, key)
	if err != nil {
		return 0, Position{}, err
	}
	defer v.close()
	if !v.head.Exists {
		return 0, v.mark, nil
	}
	return v.head.SeqNr, v.mark, nil
}

// Read calls fn for the journal's live events with seqNr >= from, in seqNr
// order, as they stream from the store and then from Kafka; it returns
// where its Mark was written. An error from fn stops the read and is
// returned.
func (j *Journal) Read(ctx context.Context, key Key, from int64, fn func(Event) error) (Position, error) {
	v, err := j.view(ctx, key)
	if err != nil {
		return Position{}, err
	}
	defer v.close()
	if !v.head.Exists {
		return v.mark, nil
	}
	lo := max(from, v.head.DeleteTo+1)
	last := int64(0)
	emit := func(e Event) error {
		if e.SeqNr < lo || e.SeqNr <= last {
			return nil // deleted, before from, or a duplicate at the seam
		}
		last = e.SeqNr
		return fn(e)
	}
	if v.head.StorageValid && v.snap != nil {
		err := v.snap.Events(ctx, store.Key{Topic: key.Topic, ID: key.ID}, lo, func(e store.Event) error {
			return emit(Event{SeqNr: e.SeqNr, Tags: e.Tags, PayloadType: typeOf(e.Kind), Payload: e.Payload, Timestamp: e.Timestamp})
		})
		if err != nil {
			return v.mark, err
		}
	}
	for _, a := range v.appends {
		ev, err := action.DecodePayload(a.header.PayloadType, a.value)
		if err != nil {
			return v.mark, fmt.Errorf("journal %s: append at offset %d: %w", key, a.offset, err)
		}
		for _, e := range ev.Events {
			if err := emit(Event{SeqNr: e.SeqNr, Tags: e.Tags, PayloadType: typeOf(e.Kind), Payload: e.Payload, Timestamp: a.timestamp}); err != nil {
				return v.mark, err
			}
		}
	}
	return v.mark, nil
}

// headAppend is an unreplicated Append of the journal, kept for Read.
type headAppend struct {
	offset    int64
	timestamp time.Time
	header    action.Header
	value     []byte
}

// view is what a read sees: the Mark, a store snapshot, the head folded
// over storage's row, and the head's appends that count.
type view struct {
	mark    Position
	snap    store.Snapshot
	head    store.Head
	appends []headAppend
	// stored is the journal's row in the store as a Head, before the fold;
	// ptr (if hasPtr) the store's pointer of the Mark's partition.
	stored store.Head
	ptr    int64
	hasPtr bool
}

func (v *view) close() {
	if v.snap != nil {
		_ = v.snap.Close()
	}
}

func (j *Journal) view(ctx context.Context, key Key) (*view, error) {
	if err := key.check(); err != nil {
		return nil, err
	}
	mark, err := j.produce(ctx, key, action.Header{Kind: action.KindMark, ID: randomID(), Origin: j.o.origin}, nil, nil)
	if err != nil {
		return nil, err
	}
	if j.afterMark != nil {
		j.afterMark()
	}
	v := &view{mark: mark}
	ptr, hasPtr := int64(0), false
	var m store.Meta
	var ok bool
	if j.store.readable {
		v.snap, err = j.store.s.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		sk := store.Key{Topic: key.Topic, ID: key.ID}
		if ptr, hasPtr, err = v.snap.Pointer(ctx, key.Topic, mark.Partition); err == nil {
			m, ok, err = v.snap.Meta(ctx, sk)
		}
		if err != nil {
			v.close()
			return nil, err
		}
	}
	v.head = store.NewHead(m, ok)
	v.stored, v.ptr, v.hasPtr = v.head, ptr, hasPtr
	j.stats.views.Add(1)
	if hasPtr && ptr >= mark.Offset {
		j.stats.storeOnly.Add(1)
		return v, nil // the store alone is complete
	}
	start := int64(0)
	if hasPtr {
		start = ptr + 1
	}
	acts, cached, err := j.headActions(ctx, key, mark, start, start)
	if err != nil {
		v.close()
		return nil, err
	}
	if cached {
		j.stats.cacheHits.Add(1)
	} else {
		j.stats.kafkaReads.Add(1)
	}
	for _, a := range acts {
		if !v.head.Apply(a.header, a.offset) {
			continue // an Append not above the journal's seqNr: void
		}
		switch a.header.Kind {
		case action.KindPurge:
			v.appends = v.appends[:0]
		case action.KindAppend:
			v.appends = append(v.appends, headAppend{offset: a.offset, timestamp: a.timestamp, header: a.header, value: a.value})
		}
	}
	if !v.head.Exists {
		v.appends = nil
	}
	return v, nil
}

// headAction is one decoded action of a key from the unreplicated head.
type headAction struct {
	offset    int64
	timestamp time.Time
	header    action.Header
	value     []byte // Append only
}

// readHead consumes the mark's partition from start up to the mark and
// returns key's actions.
func (j *Journal) readHead(ctx context.Context, key Key, mark Position, start int64) ([]headAction, error) {
	var acts []headAction
	err := j.consume(ctx, key.Topic, mark.Partition, start, mark.Offset, func(r *kgo.Record) {
		j.stats.headRecords.Add(1)
		if string(r.Key) != key.ID {
			return
		}
		if a, ok := j.decodeHead(r); ok {
			acts = append(acts, a)
		}
	})
	return acts, err
}

func (j *Journal) decodeHead(r *kgo.Record) (headAction, bool) {
	var hv []byte
	has := false
	for _, h := range r.Headers {
		if h.Key == action.HeaderKey {
			hv, has = h.Value, true
		}
	}
	if r.Key == nil || !has {
		return headAction{}, false
	}
	h, err := action.DecodeHeader(hv)
	if err != nil {
		// The replicator quarantines it: it never reaches the store either.
		j.o.logger.Warn("journal: skipping malformed action in head", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", err)
		return headAction{}, false
	}
	if h.Kind == action.KindUnknown || h.Kind == action.KindMark || (h.Kind == action.KindAppend && r.Value == nil) {
		return headAction{}, false
	}
	a := headAction{offset: r.Offset, timestamp: r.Timestamp, header: h}
	if h.Kind == action.KindAppend {
		// Validate as the replicator does, so that both skip the same records.
		rec := record.Record{Key: r.Key, Value: r.Value, Headers: []record.Header{{Key: action.HeaderKey, Value: hv}}}
		if _, _, _, err := parseRecord(&rec); err != nil {
			j.o.logger.Warn("journal: skipping malformed action in head", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", err)
			return headAction{}, false
		}
		a.value = r.Value
	}
	return a, true
}

// consume reads topic/partition from start until the record at offset
// `until` has been seen, calling fn for each record.
func (j *Journal) consume(ctx context.Context, topic string, partition int32, start, until int64, fn func(*kgo.Record)) error {
	if start > until {
		return nil
	}
	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(start)}}),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, j.consOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("journal: head consumer: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("journal: reading %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done || r.Offset > until {
				done = true
				return
			}
			fn(r)
			if r.Offset == until {
				done = true
			}
		})
		if done {
			return nil
		}
	}
}

func (j *Journal) produce(ctx context.Context, key Key, h action.Header, value []byte, extra []kgo.RecordHeader) (Position, error) {
	if err := j.checkTopic(ctx, key); err != nil {
		return Position{}, err
	}
	rec, err := j.record(key, h, value, extra)
	if err != nil {
		return Position{}, err
	}
	j.own.start(rec.Topic)
	err = j.client.ProduceSync(ctx, rec).FirstErr()
	j.own.done(rec.Topic, err == nil, rec.Partition, rec.Offset, key.ID, h)
	if err != nil {
		switch {
		case errors.Is(err, kerr.MessageTooLarge):
			// Under the producer's limit (record checked it), so the broker's:
			// the topic's max.message.bytes or the broker's message.max.bytes.
			return Position{}, fmt.Errorf("journal %s: %s: the %d-byte action record is over the topic's max.message.bytes (or the broker's message.max.bytes), which is below the producer's limit of %d bytes; an Append is one Kafka record: split its events over several Appends: %w: %w",
				key, h.Kind, recordSize(rec), j.maxRecord, ErrTooLarge, err)
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			j.topics.Delete(key.Topic)
			return Position{}, fmt.Errorf("journal %s: topic %q does not exist (the journal does not create topics): %w: %w", key, key.Topic, ErrUnknownTopic, err)
		}
		return Position{}, fmt.Errorf("journal %s: produce %s: %w", key, h.Kind, err)
	}
	return Position{Partition: rec.Partition, Offset: rec.Offset}, nil
}

// ErrTooLarge is wrapped by the error of an action whose Kafka record is
// over the producer's limit or the broker's (an Append is one record).
var ErrTooLarge = errors.New("journal action too large for one Kafka record")

// ErrUnknownTopic is wrapped by the error of a request for a journal
// whose topic does not exist. The journal never creates topics: the
// partition of a journal's actions depends on the topic's partition
// count, which must not change, and an auto-created topic gets whatever
// the broker's default is.
var ErrUnknownTopic = errors.New("journal topic does not exist")

// record returns the action record of key, or an error wrapping
// ErrTooLarge if it is over the producer's per-record limit.
func (j *Journal) record(key Key, h action.Header, value []byte, extra []kgo.RecordHeader) (*kgo.Record, error) {
	hb, err := action.EncodeHeader(h)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", key, err)
	}
	rec := &kgo.Record{
		Topic:   key.Topic,
		Key:     []byte(key.ID),
		Value:   value,
		Headers: append([]kgo.RecordHeader{{Key: action.HeaderKey, Value: hb}}, extra...),
	}
	// The record batch around one record adds ~70 bytes (batch header and
	// the record's own lengths).
	if n := recordSize(rec); n+recordOverhead > int64(j.maxRecord) {
		return nil, fmt.Errorf("journal %s: %s: the action record is %d bytes (key, value and headers), over the Kafka producer's limit of %d bytes per record (franz-go ProducerBatchMaxBytes; Kafka's max.message.bytes); an Append is one Kafka record: split its events over several Appends: %w",
			key, h.Kind, n, j.maxRecord, ErrTooLarge)
	}
	return rec, nil
}

const recordOverhead = 100

func recordSize(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// topicCheckTTL is how long a topic found to exist is not asked about
// again.
const topicCheckTTL = time.Minute

// checkTopic returns an error wrapping ErrUnknownTopic if key's topic
// does not exist, asking the brokers' metadata (without creating it) at
// most once a minute per topic that exists.
func (j *Journal) checkTopic(ctx context.Context, key Key) error {
	if t, ok := j.topics.Load(key.Topic); ok && time.Since(t.(time.Time)) < topicCheckTTL {
		return nil
	}
	// kgox.TopicPartitions asks a broker, again for a second if it does
	// not know the topic: a topic created a moment ago can be unknown to
	// the broker answering for a little while.
	_, err := kgox.TopicPartitions(ctx, j.client, key.Topic, kgox.UnknownTopicWait)
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("journal %s: topic %q does not exist (the journal does not create topics: create it with the partition count it keeps for good): %w", key, key.Topic, ErrUnknownTopic)
	case errors.Is(err, kerr.LeaderNotAvailable):
		// It exists, its partitions have no leader yet (just created,
		// or a broker is down): the produce retries.
	case err != nil:
		return fmt.Errorf("journal %s: looking up topic %q: %w", key, key.Topic, err)
	}
	j.topics.Store(key.Topic, time.Now())
	return nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
