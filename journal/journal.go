package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/jsonscan"
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
	stats     struct{ views, storeOnly, kafkaReads, cacheHits atomic.Int64 }
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
}

// Stats returns the counters.
func (j *Journal) Stats() JournalStats {
	return JournalStats{Views: j.stats.views.Load(), StoreOnly: j.stats.storeOnly.Load(), KafkaReads: j.stats.kafkaReads.Load(), CacheHits: j.stats.cacheHits.Load()}
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
	j := &Journal{client: client, store: s, o: o}
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

// Close stops the head cache's consumers. It does not close the client or
// the store.
func (j *Journal) Close() {
	if j.cache != nil {
		j.cache.close()
	}
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
func (j *Journal) Append(ctx context.Context, key Key, events []Event, opts ...AppendOption) (Position, error) {
	var c appendConfig
	for _, o := range opts {
		o(&c)
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
	return j.produce(ctx, key, h, value, extra)
}

// Purge removes the whole journal: the next Append starts a new one.
func (j *Journal) Purge(ctx context.Context, key Key) (Position, error) {
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
}

func (v *view) close() {
	if v.snap != nil {
		v.snap.Close()
	}
}

func (j *Journal) view(ctx context.Context, key Key) (*view, error) {
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
	j.stats.views.Add(1)
	if hasPtr && ptr >= mark.Offset {
		j.stats.storeOnly.Add(1)
		return v, nil // the store alone is complete
	}
	start := int64(0)
	if hasPtr {
		start = ptr + 1
	}
	var acts []headAction
	if j.cache != nil {
		acts, err = j.cache.actions(ctx, key, mark, start)
	} else {
		acts, err = j.readHead(ctx, key, mark, start)
	}
	if err != nil {
		v.close()
		return nil, err
	}
	for _, a := range acts {
		v.head.Apply(a.header, a.offset)
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
	j.stats.kafkaReads.Add(1)
	var acts []headAction
	err := j.consume(ctx, key.Topic, mark.Partition, start, mark.Offset, func(r *kgo.Record) {
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
	hb, err := action.EncodeHeader(h)
	if err != nil {
		return Position{}, fmt.Errorf("journal %s: %w", key, err)
	}
	rec := &kgo.Record{
		Topic:   key.Topic,
		Key:     []byte(key.ID),
		Value:   value,
		Headers: append([]kgo.RecordHeader{{Key: action.HeaderKey, Value: hb}}, extra...),
	}
	if err := j.client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return Position{}, fmt.Errorf("journal %s: produce %s: %w", key, h.Kind, err)
	}
	return Position{Partition: rec.Partition, Offset: rec.Offset}, nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ErrConflict is wrapped by the error of an Append that the journal
// refuses because its seqNrs are not above the journal's (a ConflictError).
var ErrConflict = errors.New("journal append conflict")

// ConflictError is the error of a refused Append.
type ConflictError struct {
	Key      Key
	From, To int64 // the refused Append's seqNrs
	SeqNr    int64 // the journal's seqNr, which From must exceed
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("journal %s: append %d..%d: seqNrs must be above the journal's seqNr %d", e.Key, e.From, e.To, e.SeqNr)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }
