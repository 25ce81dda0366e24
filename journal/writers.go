package journal

import (
	"sync"

	"github.com/streamd/streamd/journal/internal/store"
)

// maxWriters bounds how many journals' last known seqNrs a Journal keeps.
const maxWriters = 1 << 16

// writers serializes a Journal's Appends per journal and remembers, for
// each journal recently appended to, the state the last Append (or its
// Mark) found: exact as of that offset, so that the next Append folds only
// the actions after it (not all those the replicator has not stored yet),
// and a hint of a conflict (made sure with a Mark before refusing without
// writing: another process may have purged the journal since).
type writers struct {
	mu sync.Mutex
	m  map[Key]*writer
}

type writer struct {
	mu   sync.Mutex // held by the Append in progress
	refs int        // Appends holding or waiting for mu; guarded by writers.mu
	// Guarded by mu: if known, state is the journal's after every action up
	// to asOf (inclusive) in asOf's partition.
	state store.Head
	asOf  Position
	known bool
}

// acquire returns key's writer, locked.
func (ws *writers) acquire(key Key) *writer {
	ws.mu.Lock()
	if ws.m == nil {
		ws.m = map[Key]*writer{}
	}
	w := ws.m[key]
	if w == nil {
		if len(ws.m) >= maxWriters {
			// Forget idle journals' hints, about half of them (map order is
			// random).
			n := 0
			for k, x := range ws.m {
				if x.refs == 0 {
					delete(ws.m, k)
					if n++; n >= maxWriters/2 {
						break
					}
				}
			}
		}
		w = &writer{}
		ws.m[key] = w
	}
	w.refs++
	ws.mu.Unlock()
	w.mu.Lock()
	return w
}

// release unlocks w, acquired for key.
func (ws *writers) release(key Key, w *writer) {
	w.mu.Unlock()
	ws.mu.Lock()
	w.refs--
	ws.mu.Unlock()
}
