// Package store is the replication model of the journal: the folded
// operations a replicator applies per key, the rules that apply them
// idempotently, the head fold that readers use for what storage does not
// have yet, and the Store interface with an in-memory implementation (the
// model that tests compare real stores against).
package store

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/streamd/streamd/journal/internal/action"
)

// Key names a journal.
type Key struct {
	Topic, ID string
}

// Event is one stored event.
type Event struct {
	SeqNr   int64
	Tags    []string
	Kind    action.PayloadKind
	Payload []byte

	Partition int32
	Offset    int64
	Timestamp time.Time
	Origin    string
	Version   string
	// Metadata is the Append header's metadata.data (nil = absent).
	Metadata json.RawMessage
	// Headers are the Append record's user headers.
	Headers map[string]string
}

// Meta is the per-journal row (metajournal).
type Meta struct {
	Partition   int32
	Offset      int64 // of the last applied action
	SeqNr       int64
	DeleteTo    int64 // 0 = none
	ExpireAfter time.Duration
	ExpireOn    time.Time // zero = never
	Origin      string
	Created     time.Time
	Updated     time.Time
}

// Op is one folded action for one key.
type Op struct {
	Kind      action.Kind // KindAppend, KindDelete or KindPurge
	Offset    int64       // the newest record folded into this op
	Timestamp time.Time   // that record's timestamp
	// Append: the Append actions merged into this op, oldest first. Each is
	// accepted or refused on its own (see Accepts).
	Parts []AppendPart
	// Delete: the highest deleteTo.
	DeleteTo int64
	Origin   string
}

// AppendPart is one Append action of a merged append Op.
type AppendPart struct {
	Offset      int64
	Timestamp   time.Time
	From, To    int64
	ExpireAfter time.Duration // 0 = none
	Origin      string
	// Events are the action's events left after dropping those that a later
	// Delete in the same batch removes.
	Events []Event
}

// Accepts reports whether an Append of seqNrs from.. applies to a journal:
// a journal that does not exist accepts any, one that exists only seqNrs
// above both its seqNr and its deleteTo. An Append it does not accept is a
// conflict: it never overwrites a stored event nor moves seqNr back; the
// replicator skips it (and reports it) and readers ignore it alike.
func Accepts(exists bool, seqNr, deleteTo, from int64) bool {
	return !exists || from > max(seqNr, deleteTo)
}

// Conflict is an Append action that a batch did not apply because its
// seqNrs were not above the journal's (see Accepts).
type Conflict struct {
	ID       string
	Offset   int64
	From, To int64
	// SeqNr is the journal's max(seqNr, deleteTo) that From had to exceed.
	SeqNr int64
	// Events is how many of its events the batch did not write.
	Events int
}

// KeyOps are the ops of one key, oldest first.
type KeyOps struct {
	ID  string
	Ops []Op
}

// Batch is what a replicator applies for one partition at a time: the ops
// of every key, then the partition pointer (the highest offset handled).
type Batch struct {
	Topic     string
	Partition int32
	Pointer   int64
	Keys      []KeyOps
	// OnConflict, if set, is called inside the store's transaction, before
	// the pointer is stored, with the Appends the batch does not apply; an
	// error from it fails the batch (nothing is applied).
	OnConflict func(ctx context.Context, conflicts []Conflict) error
}

// Store is a replication store.
type Store interface {
	// Apply applies b and then stores b.Pointer; a store that can do both
	// atomically does.
	Apply(ctx context.Context, b *Batch) error
	// Pointer returns the stored pointer of a partition.
	Pointer(ctx context.Context, topic string, partition int32) (offset int64, ok bool, err error)
	// Snapshot opens a consistent read view. ErrNotReadable if the store
	// cannot be read.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Expired lists journals whose expire_on is at or before now.
	Expired(ctx context.Context, now time.Time, limit int) ([]Key, error)
	// Close closes the store; ctx bounds how long it may take.
	Close(ctx context.Context) error
}

// Snapshot is a consistent read view of a store.
type Snapshot interface {
	Pointer(ctx context.Context, topic string, partition int32) (int64, bool, error)
	// Pointers returns the stored pointer of every partition of topic that
	// has one.
	Pointers(ctx context.Context, topic string) (map[int32]int64, error)
	Meta(ctx context.Context, key Key) (Meta, bool, error)
	// Events calls fn for the events of key with seqNr >= from, ascending.
	Events(ctx context.Context, key Key, from int64, fn func(Event) error) error
	Close() error
}

// ErrNotReadable is returned by stores that only replicate (plugin stores).
var ErrNotReadable = errors.New("journal store cannot be read")

// KeyEvent is an event of one journal of a batch's topic.
type KeyEvent struct {
	ID string
	Event
}

// Tx is what Apply needs from a store inside one write transaction. Apply
// calls Metas first, then DeleteEvents and DeleteMetas, then PutMetas with
// the final state of every key and PutEvents (after PutMetas, so a store
// that numbers journal rows knows every row's number), then SetPointer.
// The whole batch is one transaction, so the order is not what makes it
// crash-safe (the original writes events first because its store has no
// transactions).
type Tx interface {
	// Metas returns the rows of the given journals that exist.
	Metas(ctx context.Context, topic string, ids []string) (map[string]Meta, error)
	// DeleteEvents removes the stored events of key with seqNr <= to.
	DeleteEvents(ctx context.Context, key Key, to int64) error
	DeleteMetas(ctx context.Context, topic string, ids []string) error
	// PutEvents inserts events; one already stored (same journal and seqNr)
	// is an error, never overwritten.
	PutEvents(ctx context.Context, topic string, events []KeyEvent) error
	// PutMetas upserts rows.
	PutMetas(ctx context.Context, topic string, metas map[string]Meta) error
	SetPointer(ctx context.Context, topic string, partition int32, offset int64) error
}

// ApplyTx applies b inside tx: per key, per op, the rules of the
// reference, idempotently (an op at or below the key's last applied offset
// is skipped), and finally the pointer. The effect of every key's ops is
// computed in memory first (events a later Delete or Purge of the batch
// removes are never written), so the store sees a few set-wise statements
// per batch, not a few per action.
func ApplyTx(ctx context.Context, tx Tx, b *Batch, now time.Time) error {
	ids := make([]string, len(b.Keys))
	for i, k := range b.Keys {
		ids[i] = k.ID
	}
	metas, err := tx.Metas(ctx, b.Topic, ids)
	if err != nil {
		return err
	}
	n := 0
	for _, k := range b.Keys {
		for _, op := range k.Ops {
			for _, p := range op.Parts {
				n += len(p.Events)
			}
		}
	}
	var (
		puts      = make([]KeyEvent, 0, n)
		delMeta   []string
		putMeta   = make(map[string]Meta, len(b.Keys))
		conflicts []Conflict
	)
	for _, k := range b.Keys {
		key := Key{Topic: b.Topic, ID: k.ID}
		m, ok := metas[k.ID]
		r := applyKey(b.Partition, k.Ops, m, ok, now)
		for _, to := range r.deletes {
			if err := tx.DeleteEvents(ctx, key, to); err != nil {
				return err
			}
		}
		if r.removed {
			delMeta = append(delMeta, k.ID)
		}
		if r.exists && r.dirty {
			putMeta[k.ID] = r.meta
		}
		for _, e := range r.events {
			puts = append(puts, KeyEvent{ID: k.ID, Event: e})
		}
		for _, c := range r.conflicts {
			c.ID = k.ID
			conflicts = append(conflicts, c)
		}
	}
	if len(delMeta) > 0 {
		if err := tx.DeleteMetas(ctx, b.Topic, delMeta); err != nil {
			return err
		}
	}
	if len(putMeta) > 0 {
		if err := tx.PutMetas(ctx, b.Topic, putMeta); err != nil {
			return err
		}
	}
	if len(puts) > 0 {
		if err := tx.PutEvents(ctx, b.Topic, puts); err != nil {
			return err
		}
	}
	if len(conflicts) > 0 && b.OnConflict != nil {
		if err := b.OnConflict(ctx, conflicts); err != nil {
			return err
		}
	}
	return tx.SetPointer(ctx, b.Topic, b.Partition, b.Pointer)
}

// keyResult is the effect of one key's ops on the store.
type keyResult struct {
	deletes   []int64 // DeleteEvents(to) on rows stored before the batch, in order
	events    []Event // events to write, by increasing seqNr
	conflicts []Conflict
	meta      Meta
	exists    bool // the row exists at the end
	dirty     bool // and must be written
	removed   bool // the row that existed before the batch is gone (purged)
}

func applyKey(partition int32, ops []Op, meta Meta, ok bool, now time.Time) keyResult {
	var r keyResult
	existed := ok
	dropPending := func(to int64) {
		r.events = slices.DeleteFunc(r.events, func(e Event) bool { return e.SeqNr <= to })
	}
	for _, op := range ops {
		switch op.Kind {
		case action.KindAppend:
			for _, p := range op.Parts {
				if ok && p.Offset <= meta.Offset {
					continue // applied before (redelivered)
				}
				if !Accepts(ok, meta.SeqNr, meta.DeleteTo, p.From) {
					r.conflicts = append(r.conflicts, Conflict{Offset: p.Offset, From: p.From, To: p.To, SeqNr: max(meta.SeqNr, meta.DeleteTo), Events: len(p.Events)})
					continue
				}
				// Accepted: every event is above the row's seqNr and deleteTo,
				// so above every event stored or written before it.
				r.events = append(r.events, p.Events...)
				if !ok {
					meta = Meta{Created: now, DeleteTo: p.From - 1}
					ok = true
				}
				meta.SeqNr = p.To
				meta.Partition, meta.Offset, meta.Updated = partition, p.Offset, now
				if p.Origin != "" {
					meta.Origin = p.Origin
				}
				meta.ExpireAfter = p.ExpireAfter
				meta.ExpireOn = time.Time{}
				if p.ExpireAfter > 0 {
					meta.ExpireOn = p.Timestamp.Add(p.ExpireAfter)
				}
				r.dirty = true
			}
		case action.KindDelete:
			if ok && op.Offset <= meta.Offset {
				continue
			}
			if !ok {
				meta = Meta{Created: now, SeqNr: op.DeleteTo, DeleteTo: op.DeleteTo, Origin: op.Origin}
				ok = true
			} else {
				seq1 := max(meta.SeqNr, meta.DeleteTo)
				if dt1 := min(op.DeleteTo, seq1); dt1 > meta.DeleteTo {
					r.deletes = append(r.deletes, dt1)
					dropPending(dt1)
					meta.DeleteTo = dt1
				}
			}
			meta.Partition, meta.Offset, meta.Updated = partition, op.Offset, now
			r.dirty = true
		case action.KindPurge:
			if !ok || op.Offset < meta.Offset {
				continue
			}
			r.deletes = append(r.deletes, math.MaxInt64)
			dropPending(math.MaxInt64)
			if existed {
				r.removed = true
			}
			ok, r.dirty = false, false
		}
	}
	r.exists, r.meta = ok, meta
	return r
}
