package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/journal"
	"github.com/streamd/streamd/record"
)

// TestJournalSIGKILLThroughDaemon is the journal's crash test run the way a
// user runs the replicator: `streamd run` with a kafka -> journal pipeline,
// SIGKILLed again and again while 10,000 actions over 100 ids (written with
// the journal API: appends, deletes, purges, and a few malformed records)
// flow. After a last run has caught up, the store must hold exactly what
// applying every action alone, in partition order, to an empty store gives
// (the model), for SQLite and PostgreSQL.
func TestJournalSIGKILLThroughDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test is long")
	}
	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "journal.db")
		journalCrash(t, "sqlite:"+db, "sqlite", db)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("STREAMD_TEST_POSTGRES_DSN")
		if dsn == "" {
			testenv.Missing(t, "PostgreSQL (STREAMD_TEST_POSTGRES_DSN; scripts/postgres start)")
		}
		journalCrash(t, dsn, "pgx", dsn)
	})
}

func journalCrash(t *testing.T, dsn, driver, source string) {
	ctx := context.Background()
	b := testenv.Kafka(t)
	topic := testenv.Topic(t, "jcrash")
	const partitions, ids, actions = 4, 100, 10_000
	b.CreateTopic(t, topic, partitions)
	cfg := writeConfig(t, brokersTOML(b)+fmt.Sprintf(`
[journal]
store = %q
[[pipeline]]
name = "replicate"
commit_interval = "0s"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
instance_id = "e2e-journal-kill"
session_timeout = "10s"
[pipeline.sink]
type = "journal"
`, dsn, topic, testenv.Topic(t, "replicator")))

	begin := time.Now()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	cl := b.Client(t, kgo.ProducerLinger(0))
	// The writers' journal reads the same store (Delete computes the
	// pointer: store plus the unreplicated head), as an application would.
	ws, err := journal.OpenStore(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Check(t, ws.Close)
	j := journal.New(cl, ws, journal.WithOrigin("e2e"))
	defer testenv.Close(t, context.Background(), j)
	// Twenty writers, each with its own five ids (so each journal's actions stay
	// in order), write the actions.
	const writers = 20
	prodErr := make(chan error, 1)
	go func() {
		errs := make(chan error, writers)
		for w := range writers {
			go func() {
				errs <- writeActions(ctx, j, cl, topic, rand.New(rand.NewPCG(seed, uint64(w))), w, writers, ids, actions/writers)
			}()
		}
		var first error
		for range writers {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		prodErr <- first
	}()

	store, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(store.Close)
	applied := func() int64 { // actions the store's pointers say are replicated
		rows, err := store.QueryContext(ctx, fmt.Sprintf(`SELECT kafka_offset FROM journal_pointer WHERE topic = '%s'`, topic))
		if err != nil {
			return 0
		}
		defer testenv.Ignore(rows.Close)
		var sum int64
		for rows.Next() {
			var off int64
			if rows.Scan(&off) == nil {
				sum += off + 1
			}
		}
		return sum
	}

	// Kill the daemon a random 0.1-1.5 s after it has visibly replicated
	// something, again and again, while the actions are written.
	kills := 0
	produced := false
	pollProduced := func() { // notes when the writers are done
		if produced {
			return
		}
		select {
		case err := <-prodErr:
			if err != nil {
				t.Fatal(err)
			}
			produced = true
		default:
		}
	}
	for !produced {
		before := applied()
		d := start(t, cfg)
		for deadline := time.Now().Add(60 * time.Second); applied() <= before && time.Now().Before(deadline); {
			if pollProduced(); produced {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(100+rng.IntN(1400)) * time.Millisecond)
		d.kill(t)
		kills++
		pollProduced()
	}
	t.Logf("actions written after %v", time.Since(begin).Round(time.Second))
	if kills < 3 {
		t.Fatalf("only %d kills while actions flowed", kills)
	}

	// A last run catches up; then SIGTERM.
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	d := start(t, cfg)
	for deadline := time.Now().Add(3 * time.Minute); applied() < total || !strings.Contains(d.log.String(), "pipeline running"); {
		if time.Now().After(deadline) {
			t.Fatalf("replicated %d of %d actions after 3 minutes", applied(), total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.signal(t, syscall.SIGTERM)
	if err := <-d.done; err != nil {
		t.Fatalf("last run: %v", err)
	}
	t.Logf("%d actions, %d kills, caught up after %v", total, kills, time.Since(begin).Round(time.Second))

	// The model: every action record applied alone, in partition order,
	// by a replicator of its own into a fresh SQLite store.
	modelPath := filepath.Join(t.TempDir(), "model.db")
	ms, err := journal.OpenStore(ctx, "sqlite:"+modelPath)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := journal.NewReplicator(ms)
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, b, topic, total)
	for _, r := range recs {
		if _, err := rep.Write(ctx, []record.Record{r}); err != nil {
			t.Fatalf("model: %v", err)
		}
	}
	if err := ms.Close(context.Background()); err != nil {
		t.Fatalf("model: %v", err)
	}
	t.Logf("model built after %v", time.Since(begin).Round(time.Second))
	model, err := sql.Open("sqlite", modelPath)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(model.Close)
	for _, q := range []string{
		`SELECT id, seq_nr, kafka_partition, kafka_offset, payload_type, payload, tags FROM journal WHERE topic = '%s' ORDER BY id, seq_nr`,
		`SELECT id, seq_nr, delete_to, kafka_partition, kafka_offset FROM journal_meta WHERE topic = '%s' ORDER BY id`,
	} {
		got, want := dumpRows(t, store, fmt.Sprintf(q, topic)), dumpRows(t, model, fmt.Sprintf(q, topic))
		if len(want) == 0 {
			t.Fatalf("the model is empty for %q", q)
		}
		if !slices.Equal(got, want) {
			t.Errorf("store differs from the model (%d rows vs %d) for %s", len(got), len(want), q)
			for i := 0; i < max(len(got), len(want)); i++ {
				g, w := "-", "-"
				if i < len(got) {
					g = got[i]
				}
				if i < len(want) {
					w = want[i]
				}
				if g != w {
					t.Errorf("first difference at row %d:\n got  %s\n want %s", i, g, w)
					break
				}
			}
		}
	}
}

// writeActions writes n actions over the journals of topic whose id number
// (below ids) is w modulo writers, through the journal API (appends of 1-5
// events, deletes, purges) and, now and then, a malformed action record,
// pausing so that they flow for several seconds.
func writeActions(ctx context.Context, j *journal.Journal, cl *kgo.Client, topic string, rng *rand.Rand, w, writers, ids, n int) error {
	next := map[string]int64{}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("id-%03d", w+writers*rng.IntN(ids/writers))
		key := journal.Key{Topic: topic, ID: id}
		var err error
		switch p := rng.IntN(100); {
		case p < 78:
			var evs []journal.Event
			for k := 0; k <= rng.IntN(5); k++ {
				next[id]++
				evs = append(evs, journal.Event{SeqNr: next[id], Tags: []string{"e2e"}, PayloadType: journal.PayloadJSON,
					Payload: []byte(fmt.Sprintf(`{"i":%d,"seq":%d}`, i, next[id]))})
			}
			_, err = j.Append(ctx, key, evs)
		case p < 93:
			_, _, err = j.Delete(ctx, key, max(1, next[id]-int64(rng.IntN(4))))
		case p < 98:
			_, err = j.Purge(ctx, key)
			next[id] = 0
		default: // a malformed action: the replicator quarantines it and goes on
			err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(id),
				Headers: []kgo.RecordHeader{{Key: "journal.action", Value: []byte(`{"append":{"range":"bad"}}`)}}}).FirstErr()
		}
		if err != nil {
			return fmt.Errorf("action %d on %s: %w", i, id, err)
		}
		if i%25 == 24 {
			time.Sleep(250 * time.Millisecond)
		}
	}
	return nil
}

// readAll reads the n records of topic, in offset order per partition.
func readAll(t *testing.T, b *testenv.Broker, topic string, n int64) []record.Record {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []record.Record
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for int64(len(out)) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records of %s", len(out), n, topic)
		}
		fs.EachRecord(func(r *kgo.Record) {
			rec := record.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, record.Header{Key: h.Key, Value: h.Value})
			}
			out = append(out, rec)
		})
	}
	slices.SortStableFunc(out, func(a, b record.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

// dumpRows returns the rows of query as strings, one per row.
func dumpRows(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer testenv.Ignore(rows.Close)
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			parts[i] = fmt.Sprintf("%v", v)
		}
		out = append(out, strings.Join(parts, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
