package store

import (
	"time"

	"github.com/streamd/streamd/journal/internal/action"
)

// Action is one decoded action record of a key.
type Action struct {
	Header    action.Header
	Events    *action.Events // Append only
	Offset    int64
	Timestamp time.Time
	Headers   map[string]string // Append's user headers
}

// Fold turns one key's actions (oldest first, one partition) into the ops
// to apply, as kafka-journal's replicator does: Marks are dropped, all that
// precedes the last Purge is dropped, consecutive Appends merge into one op
// (carrying the newest offset, each kept as a part that is accepted or
// refused on its own), consecutive Deletes collapse into the largest, and
// events that a later Delete in the batch removes are not written. The
// result applies to the same state as the actions one by one.
func Fold(partition int32, acts []Action) []Op {
	start := 0
	for i, a := range acts {
		if a.Header.Kind == action.KindPurge {
			start = i
		}
	}
	acts = acts[start:]
	// maxDeleteAfter[i] = the largest Delete.to at or after i.
	maxDel := make([]int64, len(acts)+1)
	for i := len(acts) - 1; i >= 0; i-- {
		maxDel[i] = maxDel[i+1]
		if acts[i].Header.Kind == action.KindDelete && acts[i].Header.To > maxDel[i] {
			maxDel[i] = acts[i].Header.To
		}
	}
	var ops []Op
	for i, a := range acts {
		h := a.Header
		var last *Op
		if len(ops) > 0 {
			last = &ops[len(ops)-1]
		}
		switch h.Kind {
		case action.KindPurge:
			ops = append(ops, Op{Kind: action.KindPurge, Offset: a.Offset, Timestamp: a.Timestamp, Origin: h.Origin})
		case action.KindDelete:
			if last != nil && last.Kind == action.KindDelete {
				last.DeleteTo = max(last.DeleteTo, h.To)
				last.Offset, last.Timestamp = a.Offset, a.Timestamp
				continue
			}
			ops = append(ops, Op{Kind: action.KindDelete, Offset: a.Offset, Timestamp: a.Timestamp, DeleteTo: h.To, Origin: h.Origin})
		case action.KindAppend:
			if last == nil || last.Kind != action.KindAppend {
				ops = append(ops, Op{Kind: action.KindAppend})
				last = &ops[len(ops)-1]
			}
			last.Offset, last.Timestamp, last.Origin = a.Offset, a.Timestamp, h.Origin
			part := AppendPart{Offset: a.Offset, Timestamp: a.Timestamp, From: h.From, To: h.To, ExpireAfter: a.Events.Metadata.ExpireAfter, Origin: h.Origin}
			for _, e := range a.Events.Events {
				// If the part is accepted, a later Delete of the batch removes
				// its events up to the Delete's to: they are at or below the
				// journal's seqNr when the Delete applies.
				if e.SeqNr <= maxDel[i] {
					continue
				}
				part.Events = append(part.Events, Event{
					SeqNr: e.SeqNr, Tags: e.Tags, Kind: e.Kind, Payload: e.Payload,
					Partition: partition, Offset: a.Offset, Timestamp: a.Timestamp,
					Origin: h.Origin, Version: h.Version, Metadata: h.Metadata, Headers: a.Headers,
				})
			}
			last.Parts = append(last.Parts, part)
		}
	}
	return ops
}
