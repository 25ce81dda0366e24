package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

type ptrKey struct {
	topic     string
	partition int32
}

type memJournal struct {
	meta Meta
}

// Memory is an in-memory Store: the model that tests compare real stores
// with, and a store for tests.
type Memory struct {
	mu       sync.RWMutex
	journals map[Key]*memJournal
	events   map[Key]map[int64]Event
	pointers map[ptrKey]int64
	now      func() time.Time
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{journals: map[Key]*memJournal{}, events: map[Key]map[int64]Event{}, pointers: map[ptrKey]int64{}, now: time.Now}
}

// Apply implements Store.
func (m *Memory) Apply(ctx context.Context, b *Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return ApplyTx(ctx, memTx{m}, b, m.now())
}

// Pointer implements Store.
func (m *Memory) Pointer(_ context.Context, topic string, partition int32) (int64, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.pointers[ptrKey{topic, partition}]
	return p, ok, nil
}

// Snapshot implements Store: the view holds a read lock until Close.
func (m *Memory) Snapshot(context.Context) (Snapshot, error) {
	m.mu.RLock()
	return memSnap{m}, nil
}

// Expired implements Store.
func (m *Memory) Expired(_ context.Context, now time.Time, limit int) ([]Key, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Key
	for k, j := range m.journals {
		if !j.meta.ExpireOn.IsZero() && !j.meta.ExpireOn.After(now) && len(out) < limit {
			out = append(out, k)
		}
	}
	return out, nil
}

// Close implements Store.
func (m *Memory) Close(context.Context) error { return nil }

// Dump returns every journal's row and live events on topic, for comparisons.
func (m *Memory) Dump(topic string) map[Key]Dumped {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[Key]Dumped{}
	for k, j := range m.journals {
		if k.Topic != topic {
			continue
		}
		d := Dumped{SeqNr: j.meta.SeqNr, DeleteTo: j.meta.DeleteTo}
		d.Events = append(d.Events, slices.Sorted(maps.Keys(m.events[k]))...)
		out[k] = d
	}
	return out
}

// Dumped is one journal as Dump sees it.
type Dumped struct {
	SeqNr, DeleteTo int64
	Events          []int64
}

type memTx struct{ m *Memory }

func (t memTx) Metas(_ context.Context, topic string, ids []string) (map[string]Meta, error) {
	out := map[string]Meta{}
	for _, id := range ids {
		if j, ok := t.m.journals[Key{topic, id}]; ok {
			out[id] = j.meta
		}
	}
	return out, nil
}

func (t memTx) PutMetas(_ context.Context, topic string, metas map[string]Meta) error {
	for id, m := range metas {
		t.m.journals[Key{topic, id}] = &memJournal{meta: m}
	}
	return nil
}

func (t memTx) DeleteMetas(_ context.Context, topic string, ids []string) error {
	for _, id := range ids {
		delete(t.m.journals, Key{topic, id})
	}
	return nil
}

func (t memTx) PutEvents(_ context.Context, topic string, events []KeyEvent) error {
	for _, e := range events {
		key := Key{topic, e.ID}
		if _, ok := t.m.events[key][e.SeqNr]; ok {
			return fmt.Errorf("event %s/%s/%d is already stored: refusing to overwrite it", topic, e.ID, e.SeqNr)
		}
	}
	for _, e := range events {
		key := Key{topic, e.ID}
		evs := t.m.events[key]
		if evs == nil {
			evs = map[int64]Event{}
			t.m.events[key] = evs
		}
		evs[e.SeqNr] = e.Event
	}
	return nil
}

func (t memTx) DeleteEvents(_ context.Context, key Key, to int64) error {
	for s := range t.m.events[key] {
		if s <= to {
			delete(t.m.events[key], s)
		}
	}
	if len(t.m.events[key]) == 0 {
		delete(t.m.events, key)
	}
	return nil
}

func (t memTx) SetPointer(_ context.Context, topic string, partition int32, offset int64) error {
	k := ptrKey{topic, partition}
	if old, ok := t.m.pointers[k]; !ok || offset > old {
		t.m.pointers[k] = offset
	}
	return nil
}

type memSnap struct{ m *Memory }

func (s memSnap) Pointer(_ context.Context, topic string, partition int32) (int64, bool, error) {
	p, ok := s.m.pointers[ptrKey{topic, partition}]
	return p, ok, nil
}

func (s memSnap) Pointers(_ context.Context, topic string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for k, p := range s.m.pointers {
		if k.topic == topic {
			out[k.partition] = p
		}
	}
	return out, nil
}

func (s memSnap) Meta(_ context.Context, key Key) (Meta, bool, error) {
	j, ok := s.m.journals[key]
	if !ok {
		return Meta{}, false, nil
	}
	return j.meta, true, nil
}

func (s memSnap) Events(_ context.Context, key Key, from int64, fn func(Event) error) error {
	evs := s.m.events[key]
	for _, seq := range slices.Sorted(maps.Keys(evs)) {
		if seq < from {
			continue
		}
		if err := fn(evs[seq]); err != nil {
			return err
		}
	}
	return nil
}

func (s memSnap) Close() error {
	s.m.mu.RUnlock()
	return nil
}
