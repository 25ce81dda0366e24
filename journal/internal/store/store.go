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
	// Append: the seqNr range of the merged appends, and the events left
	// after dropping those a later Delete in the same batch removes.
	From, To    int64
	Events      []Event
	ExpireAfter time.Duration // the last append's expireAfter (0 = none)
	// Delete: the highest deleteTo.
	DeleteTo int64
	Origin   string
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
	Close() error
}

// Snapshot is a consistent read view of a store.
type Snapshot interface {
	Pointer(ctx context.Context, topic string, partition int32) (int64, bool, error)
	Meta(ctx context.Context, key Key) (Meta, bool, error)
	// Events calls fn for the events of key with seqNr >= from, ascending.
	Events(ctx context.Context, key Key, from int64, fn func(Event) error) error
	Close() error
}

// ErrNotReadable is returned by stores that only replicate (plugin stores).
var ErrNotReadable = errors.New("journal store cannot be read")

// Tx is what Apply needs from a store inside one write transaction.
type Tx interface {
	Meta(ctx context.Context, key Key) (Meta, bool, error)
	PutMeta(ctx context.Context, key Key, m Meta, created bool) error
	DeleteMeta(ctx context.Context, key Key) error
	// PutEvents upserts events (a redelivery rewrites the same rows).
	PutEvents(ctx context.Context, key Key, events []Event) error
	// DeleteEvents removes the events of key with seqNr <= to.
	DeleteEvents(ctx context.Context, key Key, to int64) error
	SetPointer(ctx context.Context, topic string, partition int32, offset int64) error
}

// ApplyTx applies b inside tx: per key, per op, the rules of the
// reference, idempotently (an op at or below the key's last applied offset
// is skipped), and finally the pointer.
func ApplyTx(ctx context.Context, tx Tx, b *Batch, now time.Time) error {
	for _, k := range b.Keys {
		key := Key{Topic: b.Topic, ID: k.ID}
		if err := applyKey(ctx, tx, key, b.Partition, k.Ops, now); err != nil {
			return err
		}
	}
	return tx.SetPointer(ctx, b.Topic, b.Partition, b.Pointer)
}

func applyKey(ctx context.Context, tx Tx, key Key, partition int32, ops []Op, now time.Time) error {
	meta, ok, err := tx.Meta(ctx, key)
	if err != nil {
		return err
	}
	created, dirty := false, false
	for _, op := range ops {
		switch op.Kind {
		case action.KindAppend:
			if ok && op.Offset <= meta.Offset {
				continue
			}
			// Events already applied (redelivered) or at or below deleteTo (a
			// writer appending below a Delete) are not written.
			evs := op.Events
			if ok {
				evs = evs[:0:0]
				for _, e := range op.Events {
					if e.Offset > meta.Offset && e.SeqNr > meta.DeleteTo {
						evs = append(evs, e)
					}
				}
			}
			if len(evs) > 0 {
				if err := tx.PutEvents(ctx, key, evs); err != nil {
					return err
				}
			}
			if !ok {
				meta = Meta{Created: now, DeleteTo: op.From - 1}
				ok, created = true, true
			}
			meta.SeqNr = op.To
			meta.Partition, meta.Offset, meta.Updated = partition, op.Offset, now
			if op.Origin != "" {
				meta.Origin = op.Origin
			}
			meta.ExpireAfter = op.ExpireAfter
			meta.ExpireOn = time.Time{}
			if op.ExpireAfter > 0 {
				meta.ExpireOn = op.Timestamp.Add(op.ExpireAfter)
			}
			dirty = true
		case action.KindDelete:
			if ok && op.Offset <= meta.Offset {
				continue
			}
			if !ok {
				meta = Meta{Created: now, SeqNr: op.DeleteTo, DeleteTo: op.DeleteTo, Origin: op.Origin}
				ok, created = true, true
			} else {
				seq1 := max(meta.SeqNr, meta.DeleteTo)
				dt1 := min(op.DeleteTo, seq1)
				if dt1 > meta.DeleteTo {
					if err := tx.DeleteEvents(ctx, key, dt1); err != nil {
						return err
					}
					meta.DeleteTo = dt1
				}
			}
			meta.Partition, meta.Offset, meta.Updated = partition, op.Offset, now
			dirty = true
		case action.KindPurge:
			if !ok || op.Offset < meta.Offset {
				continue
			}
			if err := tx.DeleteEvents(ctx, key, math.MaxInt64); err != nil {
				return err
			}
			if !created {
				if err := tx.DeleteMeta(ctx, key); err != nil {
					return err
				}
			}
			ok, created, dirty = false, false, false
		}
	}
	if ok && dirty {
		return tx.PutMeta(ctx, key, meta, created)
	}
	return nil
}
