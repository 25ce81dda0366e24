package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/journal/internal/store"
)

// BenchmarkReadInterleaved reads a 1,000-event journal from SQLite whose
// events were replicated one per Append, interleaved with 99 other
// journals': the layout least kind to a store that keeps events in
// insertion order (each event of the journal sits on a different page).
// p50-ms is per read of all 1,000 events through a snapshot.
func BenchmarkReadInterleaved(b *testing.B) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(b.TempDir(), "r.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer testenv.Close(b, context.Background(), s)
	const journals, events = 100, 1000
	payload := []byte(`{"order":"o-1","amount":12.5,"currency":"EUR","items":["sku-1","sku-2"],"pad":"0123456789"}`)
	off := int64(0)
	for seq := int64(1); seq <= events; seq++ {
		bt := &store.Batch{Topic: "t", Partition: 0}
		for j := 0; j < journals; j++ {
			off++
			ev := store.Event{SeqNr: seq, Kind: action.PayloadJSON, Payload: payload, Offset: off, Timestamp: time.UnixMilli(off), Tags: []string{"order"}}
			bt.Keys = append(bt.Keys, store.KeyOps{ID: fmt.Sprintf("journal-%03d", j), Ops: []store.Op{{Kind: action.KindAppend, Offset: off, Timestamp: ev.Timestamp,
				Parts: []store.AppendPart{{Offset: off, Timestamp: ev.Timestamp, From: seq, To: seq, Events: []store.Event{ev}}}}}})
		}
		bt.Pointer = off
		if err := s.Apply(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	key := store.Key{Topic: "t", ID: "journal-042"}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		snap, err := s.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := snap.Events(ctx, key, 1, func(store.Event) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if err := snap.Close(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if n != events {
			b.Fatalf("read %d events", n)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkMigrateFromV1 times opening a schema version 1 SQLite database
// of b.N events (1,000 journals, Appends of 10 events, ~100-byte payloads),
// which migrates it to version 2; events/s is the migration's rate.
//
//	go test ./journal/internal/sqlstore -run '^$' -bench MigrateFromV1 -benchtime 1000000x
func BenchmarkMigrateFromV1(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "v1.db")
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"order":"o-1","amount":12.5,"currency":"EUR","items":["sku-1","sku-2"],"pad":"0123456789"}`)
	const journals, per = 1000, 10
	next := make([]int64, journals)
	off := int64(0)
	for n := 0; n < b.N; {
		bt := &store.Batch{Topic: "t", Partition: 0}
		for j := 0; j < 256 && n < b.N; j++ {
			k := int(off % journals)
			off++
			part := store.AppendPart{Offset: off, Timestamp: time.UnixMilli(off), From: next[k] + 1}
			for e := 0; e < per && n < b.N; e++ {
				next[k]++
				n++
				part.Events = append(part.Events, store.Event{SeqNr: next[k], Kind: action.PayloadJSON, Payload: payload, Offset: off, Timestamp: part.Timestamp, Tags: []string{"order"}})
			}
			part.To = next[k]
			op := store.Op{Kind: action.KindAppend, Offset: off, Timestamp: part.Timestamp, Parts: []store.AppendPart{part}}
			bt.Keys = append(bt.Keys, store.KeyOps{ID: fmt.Sprintf("journal-%04d", k), Ops: []store.Op{op}})
		}
		bt.Pointer = off
		if err := s.Apply(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	if err := toV1(ctx, s); err != nil {
		b.Fatal(err)
	}
	testenv.Close(b, context.Background(), s)
	b.ResetTimer()
	s, err = OpenSQLite(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	defer testenv.Close(b, context.Background(), s)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
