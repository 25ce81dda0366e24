package store

import "github.com/streamd/streamd/journal/internal/action"

// Head is what a reader knows of a journal after folding the headers of
// its actions that storage has not replicated yet (the "HeadInfo"), on top
// of storage's row: it is the row the replicator will have once it has
// applied them.
type Head struct {
	// Exists is whether the journal exists after the head.
	Exists bool
	// SeqNr and DeleteTo are the journal's after the head.
	SeqNr, DeleteTo int64
	// StorageValid is false once the head has a Purge: events in storage
	// are then void (an unreplicated Purge followed by an Append must not
	// resurrect them).
	StorageValid bool
	// FirstAppend is the offset of the first Append in the head that
	// counts (after the last Purge); -1 if none: read Kafka from there.
	FirstAppend int64
}

// NewHead starts a head from storage's row (ok false: no row).
func NewHead(m Meta, ok bool) Head {
	return Head{Exists: ok, SeqNr: m.SeqNr, DeleteTo: m.DeleteTo, StorageValid: true, FirstAppend: -1}
}

// Cur is what an Append's first seqNr must exceed (see Accepts).
func (h *Head) Cur() int64 { return max(h.SeqNr, h.DeleteTo) }

// Apply folds one action header at offset into h, by the same rules
// ApplyTx uses. It reports false for an Append that h does not accept (a
// conflict, which changes nothing), true otherwise.
func (h *Head) Apply(a action.Header, offset int64) bool {
	switch a.Kind {
	case action.KindAppend:
		if !Accepts(h.Exists, h.SeqNr, h.DeleteTo, a.From) {
			return false
		}
		if !h.Exists {
			h.Exists, h.DeleteTo = true, a.From-1
		}
		h.SeqNr = a.To
		if h.FirstAppend < 0 {
			h.FirstAppend = offset
		}
	case action.KindDelete:
		if !h.Exists {
			h.Exists, h.SeqNr, h.DeleteTo = true, a.To, a.To
			return true
		}
		if dt := min(a.To, max(h.SeqNr, h.DeleteTo)); dt > h.DeleteTo {
			h.DeleteTo = dt
		}
	case action.KindPurge:
		if !h.Exists {
			return true
		}
		*h = Head{StorageValid: false, FirstAppend: -1}
	}
	return true
}
