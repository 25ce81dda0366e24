package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
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
	testenv.CloseAtEnd(t, s)
	out["sqlite"] = s
	if dsn := os.Getenv("STREAMD_TEST_POSTGRES_DSN"); dsn != "" {
		p, err := OpenPostgres(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		testenv.CloseAtEnd(t, p)
		out["postgres"] = p
	}
	return out
}

// randomActions makes a plausible action stream for a few keys: appends
// with increasing seqNrs (a few with gaps, a few conflicting: not above the
// journal's seqNr), deletes, purges, marks.
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
			switch r.IntN(10) {
			case 0:
				from += int64(r.IntN(3)) // a gap
			case 1:
				from = max(1, from-1-int64(r.IntN(3))) // at or below the journal's seqNr: a conflict, unless it starts one
			}
			to := from + int64(r.IntN(4))
			next[id] = max(next[id], to)
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
				defer testenv.Close(t, context.Background(), s)
				b := &store.Batch{Topic: testenv.Topic(t, "c"), Pointer: 1, Keys: []store.KeyOps{{ID: "k", Ops: []store.Op{{Kind: action.KindDelete, Offset: 1, DeleteTo: 3}}}}}
				if err := s.Apply(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// v1DDL is schema version 1 as streamd 0.2 created it (SQLite spelling;
// toV1 adapts it for PostgreSQL).
var v1DDL = []string{
	`CREATE TABLE journal_meta_v1 (topic TEXT NOT NULL, id TEXT NOT NULL, kafka_partition INTEGER NOT NULL, kafka_offset BIGINT NOT NULL, seq_nr BIGINT NOT NULL, delete_to BIGINT NOT NULL, expire_after_ms BIGINT, expire_on BIGINT, origin TEXT, created BIGINT NOT NULL, updated BIGINT NOT NULL, PRIMARY KEY (topic, id)) WITHOUT ROWID`,
	`CREATE TABLE journal_event_v1 (topic TEXT NOT NULL, id TEXT NOT NULL, seq_nr BIGINT NOT NULL, kafka_partition INTEGER NOT NULL, kafka_offset BIGINT NOT NULL, ts BIGINT NOT NULL, origin TEXT, version TEXT, tags TEXT, metadata TEXT, headers TEXT, payload_type SMALLINT NOT NULL, payload BLOB, PRIMARY KEY (topic, id, seq_nr)) WITHOUT ROWID`,
	`INSERT INTO journal_meta_v1 SELECT topic, id, kafka_partition, kafka_offset, seq_nr, delete_to, expire_after_ms, expire_on, origin, created, updated FROM journal_meta`,
	`INSERT INTO journal_event_v1 SELECT * FROM journal`,
	`DROP VIEW journal`,
	`DROP TABLE journal_event`,
	`DROP TABLE journal_meta`,
	`ALTER TABLE journal_meta_v1 RENAME TO journal_meta`,
	`ALTER TABLE journal_event_v1 RENAME TO journal_event`,
	`CREATE INDEX journal_meta_expire_on ON journal_meta (expire_on)`,
	`UPDATE journal_setting SET value = '1' WHERE name = 'schema_version'`,
}

// toV1 turns a version 2 database into what version 1 kept, in its
// layout.
func toV1(ctx context.Context, s *Store) error {
	for _, q := range v1DDL {
		if s.d == postgres {
			q = strings.ReplaceAll(strings.ReplaceAll(q, " WITHOUT ROWID", ""), "BLOB", "BYTEA")
		}
		if _, err := s.write.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// readAll is every journal of topic as a reader sees it: row and events.
func readAll(t *testing.T, s *Store, topic string) map[string]any {
	t.Helper()
	ctx := context.Background()
	dump, err := s.Dump(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Check(t, snap.Close)
	out := map[string]any{}
	for k := range dump {
		m, ok, err := snap.Meta(ctx, k)
		if err != nil || !ok {
			t.Fatalf("meta %v: %v %v", k, ok, err)
		}
		var evs []store.Event
		if err := snap.Events(ctx, k, 1, func(e store.Event) error { evs = append(evs, e); return nil }); err != nil {
			t.Fatal(err)
		}
		out[k.ID] = []any{m, evs}
	}
	return out
}

// TestMigrateFromV1 fills a store, turns it into a version 1 database,
// opens it again (which migrates it) and reads back the same journals;
// replication then goes on.
func TestMigrateFromV1(t *testing.T) {
	ctx := context.Background()
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	opens := map[string]func(t *testing.T) func() (*Store, error){
		"sqlite": func(t *testing.T) func() (*Store, error) {
			path := filepath.Join(t.TempDir(), "v1.db")
			return func() (*Store, error) { return OpenSQLite(ctx, path, WithLogger(logger)) }
		},
	}
	if dsn := os.Getenv("STREAMD_TEST_POSTGRES_DSN"); dsn != "" {
		opens["postgres"] = func(t *testing.T) func() (*Store, error) {
			// A schema of its own: the test drops the shared tables.
			schema := fmt.Sprintf("migrate_%d", time.Now().UnixNano())
			admin, err := OpenPostgres(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := admin.write.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if _, err := admin.write.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
					t.Errorf("drop schema %s: %v", schema, err)
				}
				testenv.Close(t, context.Background(), admin)
			})
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			return func() (*Store, error) { return OpenPostgres(ctx, dsn+sep+"search_path="+schema, WithLogger(logger)) }
		}
	}
	for name, mk := range opens {
		t.Run(name, func(t *testing.T) {
			open := mk(t)
			s, err := open()
			if err != nil {
				t.Fatal(err)
			}
			topic := testenv.Topic(t, "m")
			r := rand.New(rand.NewPCG(3, 9))
			ids, acts := randomActions(r, 6, 400)
			// Events with every column set.
			for i := range acts {
				if acts[i].Events != nil && i%3 == 0 {
					acts[i].Header.Origin, acts[i].Header.Version = "host-1", "1.2"
					acts[i].Header.Metadata = []byte(`{"m":1}`)
					acts[i].Headers = map[string]string{"h": "v"}
					for j := range acts[i].Events.Events {
						acts[i].Events.Events[j].Tags = []string{"a", "b"}
					}
				}
			}
			bs := batches(topic, ids, acts, func() int { return 1 + r.IntN(40) })
			for _, b := range bs[:len(bs)-3] {
				if err := s.Apply(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			before := readAll(t, s, topic)
			if len(before) == 0 {
				t.Fatal("no journals to migrate")
			}
			if err := toV1(ctx, s); err != nil {
				t.Fatal(err)
			}
			testenv.Close(t, context.Background(), s)
			logs.Reset()

			s, err = open()
			if err != nil {
				t.Fatal(err)
			}
			defer testenv.Close(t, context.Background(), s)
			var v string
			if err := s.read.QueryRowContext(ctx, s.bind(`SELECT value FROM journal_setting WHERE name = ?`), "schema_version").Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
				t.Fatalf("schema_version %q, %v", v, err)
			}
			if got := readAll(t, s, topic); !reflect.DeepEqual(got, before) {
				t.Fatalf("after migration\n%v\nwant\n%v", got, before)
			}
			// The migration says so, with what it copied.
			var events int
			for _, j := range before {
				events += len(j.([]any)[1].([]store.Event))
			}
			for _, want := range []string{"migrating the schema from version 1 to 2", "schema migrated from version 1 to 2", fmt.Sprintf("journals=%d events=%d", len(before), events)} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logs.String())
				}
			}
			// Replication goes on: the rest of the stream gives what applying
			// all of it to the model gives.
			for _, b := range bs[len(bs)-3:] {
				if err := s.Apply(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			model := store.NewMemory()
			for _, b := range bs {
				if err := model.Apply(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Dump(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if want := model.Dump(topic); !reflect.DeepEqual(got, want) {
				t.Fatalf("after migration and more batches\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// FuzzDecodeTags checks decodeTags against encoding/json: the same
// strings, and an error exactly when encoding/json has one.
func FuzzDecodeTags(f *testing.F) {
	for _, s := range []string{`["order"]`, `["a","b"]`, `[]`, `null`, `["a\"b"]`, `["é"]`, `[ "a" ]`, `["a",]`, `["a""b"]`, `[1]`, `["a"`, `"a"]`, `[",",","]`, `["\u0041"]`, "[\"\x01\"]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := decodeTags(s)
		var want []string
		werr := json.Unmarshal([]byte(s), &want)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%q: error %v, encoding/json %v", s, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %#v, encoding/json %#v", s, got, want)
		}
	})
}

// TestMigrateV2RaisesSeqNr: a version 2 store in which a journal's seq_nr
// went back below its stored events (the old rules accepted an Append
// below the journal's seqNr) is migrated so that seq_nr covers every
// stored event; a new Append at a stored seqNr is then a conflict, never
// an overwrite.
func TestMigrateV2RaisesSeqNr(t *testing.T) {
	ctx := context.Background()
	var logs strings.Builder
	path := filepath.Join(t.TempDir(), "v2.db")
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	part := func(off, from, to int64) store.AppendPart {
		p := store.AppendPart{Offset: off, From: from, To: to}
		for q := from; q <= to; q++ {
			p.Events = append(p.Events, store.Event{SeqNr: q, Kind: action.PayloadJSON, Payload: []byte(fmt.Sprint(q)), Offset: off})
		}
		return p
	}
	apply := func(s *Store, b *store.Batch) error { return s.Apply(ctx, b) }
	if err := apply(s, &store.Batch{Topic: "t", Pointer: 1, Keys: []store.KeyOps{
		{ID: "k", Ops: []store.Op{{Kind: action.KindAppend, Offset: 1, Parts: []store.AppendPart{part(1, 1, 5)}}}},
		{ID: "ok", Ops: []store.Op{{Kind: action.KindAppend, Offset: 1, Parts: []store.AppendPart{part(1, 1, 2)}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE journal_meta SET seq_nr = 3 WHERE id = 'k'`, `UPDATE journal_setting SET value = '2' WHERE name = 'schema_version'`} {
		if _, err := s.write.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Close(t, context.Background(), s)
	s, err = OpenSQLite(ctx, path, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), s)
	d, err := s.Dump(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if d[store.Key{Topic: "t", ID: "k"}].SeqNr != 5 || d[store.Key{Topic: "t", ID: "ok"}].SeqNr != 2 {
		t.Fatalf("after migration %+v, want k at seqNr 5, ok at 2", d)
	}
	if !strings.Contains(logs.String(), "journals=1") {
		t.Fatalf("migration log %q does not say one journal was raised", logs.String())
	}
	var conflicts []store.Conflict
	b := &store.Batch{Topic: "t", Pointer: 2, Keys: []store.KeyOps{{ID: "k", Ops: []store.Op{{Kind: action.KindAppend, Offset: 2, Parts: []store.AppendPart{part(2, 4, 4)}}}}},
		OnConflict: func(_ context.Context, cs []store.Conflict) error { conflicts = cs; return nil }}
	if err := apply(s, b); err != nil {
		t.Fatal(err)
	}
	if len(conflicts) != 1 || conflicts[0].SeqNr != 5 {
		t.Fatalf("append 4 after the migration: conflicts %+v, want one against seqNr 5", conflicts)
	}
}

// A store that holds an event the rules are about to write again refuses
// the batch: an event is never overwritten.
func TestPutEventsNeverOverwrites(t *testing.T) {
	ctx := context.Background()
	for name, s := range openStores(t) {
		t.Run(name, func(t *testing.T) {
			topic := testenv.Topic(t, "ow")
			ev := func(p string) []store.Event {
				return []store.Event{{SeqNr: 1, Kind: action.PayloadText, Payload: []byte(p), Offset: 1}}
			}
			b := &store.Batch{Topic: topic, Pointer: 1, Keys: []store.KeyOps{{ID: "k", Ops: []store.Op{{Kind: action.KindAppend, Offset: 1, Parts: []store.AppendPart{{Offset: 1, From: 1, To: 1, Events: ev("a")}}}}}}}
			if err := s.Apply(ctx, b); err != nil {
				t.Fatal(err)
			}
			// Make the row forget the event, as a store written by the old
			// rules could have it, then append seqNr 1 again.
			if _, err := s.(*Store).write.ExecContext(ctx, s.(*Store).bind(`UPDATE journal_meta SET seq_nr = 0, delete_to = 0 WHERE topic = ?`), topic); err != nil {
				t.Fatal(err)
			}
			b = &store.Batch{Topic: topic, Pointer: 2, Keys: []store.KeyOps{{ID: "k", Ops: []store.Op{{Kind: action.KindAppend, Offset: 2, Parts: []store.AppendPart{{Offset: 2, From: 1, To: 1, Events: ev("b")}}}}}}}
			err := s.Apply(ctx, b)
			if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
				t.Fatalf("apply over a stored event: %v, want a refusal", err)
			}
			snap, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer testenv.Check(t, snap.Close)
			var got string
			if err := snap.Events(ctx, store.Key{Topic: topic, ID: "k"}, 1, func(e store.Event) error { got += string(e.Payload); return nil }); err != nil {
				t.Fatal(err)
			}
			if got != "a" {
				t.Fatalf("stored event payload %q, want the original a", got)
			}
		})
	}
}

// A full disk is reported as one, naming the store,
// and nothing of the batch is applied; once there is room again the same
// batch applies. The SQLite store is made full with max_page_count (what
// SQLite answers is the same SQLITE_FULL as for a full file system; the
// journal package's TestReplicatorDiskFull fills a real tmpfs).
func TestSQLiteFullDisk(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "full.db")
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), s)
	var pages int
	if err := s.write.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+4)); err != nil {
		t.Fatal(err)
	}
	batch := func() *store.Batch {
		p := store.AppendPart{Offset: 1, From: 1, To: 200}
		for q := int64(1); q <= 200; q++ {
			p.Events = append(p.Events, store.Event{SeqNr: q, Kind: action.PayloadText, Payload: []byte(strings.Repeat("x", 1000)), Offset: 1})
		}
		return &store.Batch{Topic: "t", Pointer: 1, Keys: []store.KeyOps{{ID: "k", Ops: []store.Op{{Kind: action.KindAppend, Offset: 1, Parts: []store.AppendPart{p}}}}}}
	}
	err = s.Apply(ctx, batch())
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("apply on a full store: %v, want ErrDiskFull naming %s", err, path)
	}
	if _, ok, _ := s.Pointer(ctx, "t", 0); ok {
		t.Fatal("the pointer moved although the batch failed")
	}
	if _, err := s.write.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, batch()); err != nil {
		t.Fatalf("apply once there is room: %v", err)
	}
	d, _ := s.Dump(ctx, "t")
	if got := len(d[store.Key{Topic: "t", ID: "k"}].Events); got != 200 {
		t.Fatalf("%d events stored, want 200", got)
	}
}

// A SQLite store whose directory is missing is
// created with its directory; one whose directory cannot be (a parent is
// a file) is refused naming the path and that parent. CheckSQLitePath
// says so without creating anything.
func TestSQLiteMissingDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "missing", "sub", "j.db")
	if err := CheckSQLitePath(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CheckSQLitePath of a missing directory: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("CheckSQLitePath created the directory")
	}
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatalf("open under a missing directory: %v", err)
	}
	testenv.Close(t, context.Background(), s)
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if err := CheckSQLitePath(path); err != nil {
		t.Fatalf("CheckSQLitePath of an existing store: %v", err)
	}
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "sub", "j.db")
	for name, err := range map[string]error{"check": CheckSQLitePath(bad), "open": func() error { _, err := OpenSQLite(ctx, bad); return err }()} {
		if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s under a file: %v, want an error naming %s and %s", name, err, bad, file)
		}
	}
}
