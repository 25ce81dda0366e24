package sqlstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/testenv"
	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/journal/internal/store"
)

type dumper interface {
	store.Store
	Dump(context.Context, string) (map[store.Key]store.Dumped, error)
}

func openStores(t *testing.T) map[string]dumper {
	t.Helper()
	ctx := context.Background()
	out := map[string]dumper{}
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "j.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	out["sqlite"] = s
	if dsn := os.Getenv("STREAMD_TEST_POSTGRES_DSN"); dsn != "" {
		p, err := OpenPostgres(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		out["postgres"] = p
	}
	return out
}

// randomActions makes a plausible action stream for a few keys: appends
// with increasing seqNrs, deletes, purges, marks.
func randomActions(r *rand.Rand, keys, n int) (ids []string, acts []store.Action) {
	next := map[string]int64{}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("k%d", r.IntN(keys))
		ids = append(ids, id)
		var a store.Action
		a.Offset = int64(i)
		a.Timestamp = time.UnixMilli(1_700_000_000_000 + int64(i))
		switch p := r.IntN(20); {
		case p < 13:
			from := next[id] + 1
			if r.IntN(10) == 0 {
				from += int64(r.IntN(3)) // a gap
			}
			to := from + int64(r.IntN(4))
			next[id] = to
			ev := &action.Events{}
			for s := from; s <= to; s++ {
				ev.Events = append(ev.Events, action.Event{SeqNr: s, Kind: action.PayloadJSON, Payload: []byte(fmt.Sprint(s))})
			}
			if r.IntN(4) == 0 {
				ev.Metadata.ExpireAfter = time.Hour
			}
			a.Header = action.Header{Kind: action.KindAppend, From: from, To: to, PayloadType: "json"}
			a.Events = ev
		case p < 17:
			a.Header = action.Header{Kind: action.KindDelete, To: max(1, next[id]-int64(r.IntN(3)))}
		case p < 18:
			a.Header = action.Header{Kind: action.KindPurge}
			next[id] = 0
		default:
			a.Header = action.Header{Kind: action.KindMark, ID: "m"}
		}
		acts = append(acts, a)
	}
	return ids, acts
}

// batches splits the stream into Write-sized batches and folds each.
func batches(topic string, ids []string, acts []store.Action, sizes func() int) []*store.Batch {
	var out []*store.Batch
	for i := 0; i < len(acts); {
		n := min(sizes(), len(acts)-i)
		b := &store.Batch{Topic: topic, Partition: 0, Pointer: acts[i+n-1].Offset}
		per := map[string][]store.Action{}
		var order []string
		for j := i; j < i+n; j++ {
			if _, ok := per[ids[j]]; !ok {
				order = append(order, ids[j])
			}
			per[ids[j]] = append(per[ids[j]], acts[j])
		}
		for _, id := range order {
			b.Keys = append(b.Keys, store.KeyOps{ID: id, Ops: store.Fold(0, per[id])})
		}
		out = append(out, b)
		i += n
	}
	return out
}

// TestFoldEqualsOneByOne checks that folding batches gives the same store
// as applying every action alone, on the model and on each real store, and
// that re-applying (redelivery) changes nothing.
func TestFoldEqualsOneByOne(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		ids, acts := randomActions(r, 4, 300)
		topic := testenv.Topic(t, "j")
		model := store.NewMemory()
		for _, b := range batches(topic, ids, acts, func() int { return 1 }) {
			if err := model.Apply(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		want := model.Dump(topic)
		folded := store.NewMemory()
		for _, b := range batches(topic, ids, acts, func() int { return 1 + r.IntN(50) }) {
			if err := folded.Apply(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		if got := folded.Dump(topic); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: folded model\n%v\nwant\n%v", seed, got, want)
		}
		if seed > 5 {
			continue
		}
		for name, s := range openStores(t) {
			bs := batches(topic, ids, acts, func() int { return 1 + r.IntN(50) })
			for i, b := range bs {
				if err := s.Apply(ctx, b); err != nil {
					t.Fatal(err)
				}
				// Redeliver the previous batch: ops at or below the journal's
				// offset are skipped.
				if i > 0 && r.IntN(3) == 0 {
					if err := s.Apply(ctx, bs[i-1]); err != nil {
						t.Fatal(err)
					}
					if err := s.Apply(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, err := s.Dump(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: %s\n%v\nwant\n%v", seed, name, got, want)
			}
		}
	}
}

func TestPostgresAvailable(t *testing.T) {
	if os.Getenv("STREAMD_TEST_POSTGRES_DSN") == "" {
		testenv.Missing(t, "PostgreSQL (STREAMD_TEST_POSTGRES_DSN; scripts/postgres start)")
	}
}

// TestConcurrentOpen opens one database from several goroutines at once:
// exactly one applies the schema, the others find it done; all can write.
func TestConcurrentOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	dsns := map[string]func() (*Store, error){
		"sqlite": func() (*Store, error) { return OpenSQLite(ctx, path) },
	}
	if dsn := os.Getenv("STREAMD_TEST_POSTGRES_DSN"); dsn != "" {
		dsns["postgres"] = func() (*Store, error) { return OpenPostgres(ctx, dsn) }
	}
	for name, open := range dsns {
		t.Run(name, func(t *testing.T) {
			errs := make(chan error, 6)
			stores := make(chan *Store, 6)
			for i := 0; i < 6; i++ {
				go func() {
					s, err := open()
					errs <- err
					stores <- s
				}()
			}
			for i := 0; i < 6; i++ {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
				s := <-stores
				defer s.Close()
				b := &store.Batch{Topic: testenv.Topic(t, "c"), Pointer: 1, Keys: []store.KeyOps{{ID: "k", Ops: []store.Op{{Kind: action.KindDelete, Offset: 1, DeleteTo: 3}}}}}
				if err := s.Apply(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
