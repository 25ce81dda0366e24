package journal

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/journal/internal/store"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// PointerHeader names the header of the last record of every batch a
// plugin store receives: the partition pointer to store (decimal offset).
const PointerHeader = "journal.pointer"

// NewPluginStore returns a write-only store that hands the replicator's
// folded actions to a sink plugin. For each batch (one partition) the sink
// receives, per key in order, one record per folded action in
// kafka-journal's own record format (key = id, header journal.action, value
// = the Append payload, Topic/Partition/Offset = the newest record folded
// into it; Marks never appear, Appends carry only events no later Delete
// in the batch removes), then one record with no key and the header
// journal.pointer. The plugin must apply them idempotently (skip an action
// whose offset is at or below the last one it applied for that key) and
// answer every record durable (nil) only once written. Reads are not
// supported in v1: a Journal on a plugin store reads from Kafka only.
func NewPluginStore(sink plugins.Sink) *Store {
	return &Store{s: &pluginStore{sink: sink}, readable: false, desc: "plugin"}
}

type pluginStore struct{ sink plugins.Sink }

func (p *pluginStore) Apply(ctx context.Context, b *store.Batch) error {
	var recs []record.Record
	for _, k := range b.Keys {
		for _, op := range k.Ops {
			rs, err := opRecords(b, k.ID, op)
			if err != nil {
				return err
			}
			recs = append(recs, rs...)
		}
	}
	recs = append(recs, record.Record{
		Topic: b.Topic, Partition: b.Partition, Offset: b.Pointer, Timestamp: time.Now(),
		Headers: []record.Header{{Key: PointerHeader, Value: []byte(strconv.FormatInt(b.Pointer, 10))}},
	})
	errs, err := p.sink.Write(ctx, recs)
	if err != nil {
		return fmt.Errorf("journal plugin store: %w", err)
	}
	for i, e := range errs {
		if e != nil {
			return fmt.Errorf("journal plugin store: record %d (%s/%d@%d): %w", i, recs[i].Topic, recs[i].Partition, recs[i].Offset, e)
		}
	}
	return nil
}

// opRecords returns the records of one op: one per Append action (each
// must be accepted or refused on its own), one for a Delete or a Purge.
func opRecords(b *store.Batch, id string, op store.Op) ([]record.Record, error) {
	if op.Kind != action.KindAppend {
		r := record.Record{Key: []byte(id), Topic: b.Topic, Partition: b.Partition, Offset: op.Offset, Timestamp: op.Timestamp}
		h := action.Header{Kind: op.Kind, Origin: op.Origin}
		if op.Kind == action.KindDelete {
			h.To = op.DeleteTo
		}
		hb, err := action.EncodeHeader(h)
		if err != nil {
			return nil, err
		}
		r.Headers = []record.Header{{Key: action.HeaderKey, Value: hb}}
		return []record.Record{r}, nil
	}
	out := make([]record.Record, 0, len(op.Parts))
	for _, p := range op.Parts {
		r := record.Record{Key: []byte(id), Topic: b.Topic, Partition: b.Partition, Offset: p.Offset, Timestamp: p.Timestamp}
		h := action.Header{Kind: action.KindAppend, Origin: p.Origin, From: p.From, To: p.To}
		ev := &action.Events{Metadata: action.Metadata{ExpireAfter: p.ExpireAfter}}
		for _, e := range p.Events {
			ev.Events = append(ev.Events, action.Event{SeqNr: e.SeqNr, Tags: e.Tags, Kind: e.Kind, Payload: e.Payload})
			h.Metadata = e.Metadata
		}
		if len(ev.Events) > 0 {
			v, format, err := action.EncodePayload(ev)
			if err != nil {
				return nil, err
			}
			r.Value, h.PayloadType = v, format
		} else {
			// Every event was deleted later in the batch: an Append with an
			// empty payload still moves seqNr.
			h.PayloadType = action.FormatJSON
			r.Value = []byte{}
		}
		hb, err := action.EncodeHeader(h)
		if err != nil {
			return nil, err
		}
		r.Headers = []record.Header{{Key: action.HeaderKey, Value: hb}}
		out = append(out, r)
	}
	return out, nil
}

func (p *pluginStore) Pointer(context.Context, string, int32) (int64, bool, error) {
	return 0, false, nil
}

func (p *pluginStore) Snapshot(context.Context) (store.Snapshot, error) {
	return nil, store.ErrNotReadable
}

func (p *pluginStore) Expired(context.Context, time.Time, int) ([]store.Key, error) {
	return nil, nil
}

func (p *pluginStore) Close(ctx context.Context) error {
	if c, ok := p.sink.(interface{ Close(context.Context) error }); ok {
		return c.Close(ctx)
	}
	return nil
}
