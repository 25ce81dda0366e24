package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/record"
)

// harness is one journal topic with a Journal, a store, and a replicator
// driven by hand: sync(lag) applies every record but the newest lag ones.
type harness struct {
	t       testing.TB
	ctx     context.Context
	broker  *testenv.Broker
	client  *kgo.Client
	store   *Store
	rep     *Replicator
	j       *Journal
	topic   string
	applied map[int32]int64 // next offset to hand to the replicator
}

func newHarness(t testing.TB, partitions int32, opts ...Option) *harness {
	t.Helper()
	return newHarnessOn(t, "sqlite:"+filepath.Join(t.TempDir(), "j.db"), partitions, opts...)
}

func newHarnessOn(t testing.TB, dsn string, partitions int32, opts ...Option) *harness {
	t.Helper()
	b := testenv.Kafka(t)
	topic := testenv.Topic(t, "journal")
	b.CreateTopic(t, topic, partitions)
	st, err := OpenStore(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	testenv.CloseAtEnd(t, st)
	rep, err := NewReplicator(st)
	if err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t)
	j := New(cl, st, opts...)
	testenv.CloseAtEnd(t, j)
	return &harness{t: t, ctx: context.Background(), broker: b, client: cl, store: st, rep: rep, j: j, topic: topic, applied: map[int32]int64{}}
}

// records returns every record of partition p from offset from on.
func (h *harness) records(p int32, from int64) []record.Record {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	// The high watermark: produce nothing, ask with a consumer at the end.
	end := h.end(ctx, p)
	var out []record.Record
	if from >= end {
		return nil
	}
	err := h.j.consume(ctx, h.topic, p, from, end-1, func(r *kgo.Record) {
		rec := record.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		for _, x := range r.Headers {
			rec.Headers = append(rec.Headers, record.Header{Key: x.Key, Value: x.Value})
		}
		out = append(out, rec)
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) end(ctx context.Context, p int32) int64 {
	h.t.Helper()
	offs, err := kadm.NewClient(h.client).ListEndOffsets(ctx, h.topic)
	if err != nil {
		h.t.Fatal(err)
	}
	o, ok := offs.Lookup(h.topic, p)
	if !ok || o.Err != nil {
		h.t.Fatalf("end offset of %s/%d: %v", h.topic, p, o.Err)
	}
	return o.Offset
}

// sync hands the replicator every record but the newest lag of each
// partition, in Write batches of up to 7 records.
func (h *harness) sync(lag int) {
	h.t.Helper()
	for p := int32(0); p < h.partitions(); p++ {
		recs := h.records(p, h.applied[p])
		if len(recs) <= lag {
			continue
		}
		recs = recs[:len(recs)-lag]
		for len(recs) > 0 {
			k := min(7, len(recs))
			errs, err := h.rep.Write(h.ctx, recs[:k])
			if err != nil {
				h.t.Fatal(err)
			}
			for _, e := range errs {
				if e != nil {
					h.t.Fatal(e)
				}
			}
			h.applied[p] = recs[k-1].Offset + 1
			recs = recs[k:]
		}
	}
}

func (h *harness) partitions() int32 { return 1 }

func ev(seqs ...int64) []Event {
	out := make([]Event, len(seqs))
	for i, s := range seqs {
		out[i] = Event{SeqNr: s, PayloadType: PayloadJSON, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, s))}
	}
	return out
}

func (h *harness) read(key Key, from int64) []int64 {
	h.t.Helper()
	var got []int64
	_, err := h.j.Read(h.ctx, key, from, func(e Event) error {
		if want := fmt.Sprintf(`{"n":%d}`, e.SeqNr); string(e.Payload) != want {
			h.t.Fatalf("event %d payload %s, want %s", e.SeqNr, e.Payload, want)
		}
		got = append(got, e.SeqNr)
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

func (h *harness) pointer(key Key) int64 {
	h.t.Helper()
	p, _, err := h.j.Pointer(h.ctx, key)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// step is one operation of a scenario.
type step struct {
	append []int64
	delete int64
	purge  bool
	// expectations after the step
	read     []int64 // read from 1 (nil: nothing)
	from     int64
	readFrom []int64 // read from `from`, if from > 0
	pointer  int64
}

type mode struct {
	name string
	// before a read/pointer runs (after its Mark): how much to replicate.
	atMark func(h *harness)
	// after write step i of n.
	afterWrite func(h *harness, i, n int)
}

var modes = []mode{
	// The replicator is current: reads find the store complete (pointer at
	// or past the Mark) and never read Kafka.
	{"caught-up", func(h *harness) { h.sync(0) }, func(h *harness, _, _ int) { h.sync(0) }},
	// The replicator never ran: everything comes from Kafka.
	{"stopped", func(*harness) {}, func(*harness, int, int) {}},
	// The replicator is always two records behind.
	{"lagging", func(*harness) {}, func(h *harness, _, _ int) { h.sync(2) }},
	// The replicator ran through the first step, then stopped: the store
	// holds the start, Kafka the rest (e.g. an unreplicated Purge then Append).
	{"stopped-after-first", func(*harness) {}, func(h *harness, i, _ int) {
		if i == 0 {
			h.sync(0)
		}
	}},
	// The replicator stopped half-way through the steps.
	{"stopped-midway", func(*harness) {}, func(h *harness, i, n int) {
		if i < n/2 {
			h.sync(0)
		}
	}},
}

func TestRules(t *testing.T) {
	sqlite := func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "j.db") }
	t.Run("head-cache", func(t *testing.T) { testRules(t, true, sqlite) })
	t.Run("no-cache", func(t *testing.T) { testRules(t, false, sqlite) })
}

// TestRulesPostgres runs the rules with the PostgreSQL store.
func TestRulesPostgres(t *testing.T) {
	dsn := os.Getenv("STREAMD_TEST_POSTGRES_DSN")
	if dsn == "" {
		testenv.Missing(t, "PostgreSQL (STREAMD_TEST_POSTGRES_DSN; scripts/postgres start)")
	}
	testRules(t, true, func(*testing.T) string { return dsn })
}

func testRules(t *testing.T, cache bool, dsn func(*testing.T) string) {
	scenarios := []struct {
		name  string
		steps []step
	}{
		{"append 1..5 in one batch", []step{{append: []int64{1, 2, 3, 4, 5}, read: []int64{1, 2, 3, 4, 5}, pointer: 5}}},
		{"append 1..5 in three batches", []step{
			{append: []int64{1, 2}, read: []int64{1, 2}, pointer: 2},
			{append: []int64{3}, read: []int64{1, 2, 3}, pointer: 3},
			{append: []int64{4, 5}, read: []int64{1, 2, 3, 4, 5}, pointer: 5, from: 3, readFrom: []int64{3, 4, 5}},
		}},
		{"delete all", []step{
			{append: []int64{1, 2, 3, 4, 5}, read: []int64{1, 2, 3, 4, 5}, pointer: 5},
			{delete: 5, read: nil, pointer: 5},
			{append: []int64{6}, read: []int64{6}, pointer: 6},
		}},
		{"delete first", []step{
			{append: []int64{1, 2, 3, 4, 5}, read: []int64{1, 2, 3, 4, 5}, pointer: 5},
			{delete: 1, read: []int64{2, 3, 4, 5}, pointer: 5, from: 4, readFrom: []int64{4, 5}},
		}},
		{"delete beyond end is clamped", []step{
			{append: []int64{1, 2, 3}, read: []int64{1, 2, 3}, pointer: 3},
			{delete: 10, read: nil, pointer: 3},
			{append: []int64{4, 5}, read: []int64{4, 5}, pointer: 5},
		}},
		{"delete of no journal writes nothing", []step{
			{delete: 3, read: nil, pointer: 0},
			{append: []int64{1}, read: []int64{1}, pointer: 1},
		}},
		{"purge", []step{
			{append: []int64{1, 2, 3}, read: []int64{1, 2, 3}, pointer: 3},
			{purge: true, read: nil, pointer: 0},
		}},
		{"purge then append starts a new journal", []step{
			{append: []int64{1, 2, 3, 4}, read: []int64{1, 2, 3, 4}, pointer: 4},
			{purge: true, read: nil, pointer: 0},
			{append: []int64{1, 2}, read: []int64{1, 2}, pointer: 2},
			{append: []int64{3}, read: []int64{1, 2, 3}, pointer: 3},
		}},
		{"purge then append at higher seqNrs", []step{
			{append: []int64{1, 2, 3, 4}, read: []int64{1, 2, 3, 4}, pointer: 4},
			{purge: true, read: nil, pointer: 0},
			{append: []int64{7, 8}, read: []int64{7, 8}, pointer: 8},
		}},
		{"gaps and interleaved deletes", []step{
			{append: []int64{1, 2}, read: []int64{1, 2}, pointer: 2},
			{append: []int64{5, 9}, read: []int64{1, 2, 5, 9}, pointer: 9},
			{delete: 4, read: []int64{5, 9}, pointer: 9},
			{append: []int64{10}, read: []int64{5, 9, 10}, pointer: 10, from: 6, readFrom: []int64{9, 10}},
			{delete: 9, read: []int64{10}, pointer: 10},
			{delete: 2, read: []int64{10}, pointer: 10},
		}},
		{"journal starting above 1", []step{
			{append: []int64{3, 4}, read: []int64{3, 4}, pointer: 4},
		}},
		{"empty journal", []step{{read: nil, pointer: 0}}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			answers := map[string][]string{}
			for _, m := range modes {
				t.Run(m.name, func(t *testing.T) {
					var opts []Option
					if !cache {
						opts = append(opts, WithoutHeadCache())
					}
					h := newHarnessOn(t, dsn(t), 1, opts...)
					h.j.afterMark = func() { m.atMark(h) }
					key := Key{Topic: h.topic, ID: "journal-1"}
					other := Key{Topic: h.topic, ID: "other"}
					var got []string
					for i, s := range sc.steps {
						// Another journal on the same partition is never affected.
						if _, err := h.j.Append(h.ctx, other, ev(int64(i+1))); err != nil {
							t.Fatal(err)
						}
						switch {
						case s.append != nil:
							if _, err := h.j.Append(h.ctx, key, ev(s.append...)); err != nil {
								t.Fatal(err)
							}
						case s.delete > 0:
							if _, _, err := h.j.Delete(h.ctx, key, s.delete); err != nil {
								t.Fatal(err)
							}
						case s.purge:
							if _, err := h.j.Purge(h.ctx, key); err != nil {
								t.Fatal(err)
							}
						}
						m.afterWrite(h, i, len(sc.steps))
						r := h.read(key, 1)
						if !reflect.DeepEqual(r, s.read) {
							t.Errorf("step %d: read %v, want %v", i, r, s.read)
						}
						if p := h.pointer(key); p != s.pointer {
							t.Errorf("step %d: pointer %d, want %d", i, p, s.pointer)
						}
						line := fmt.Sprintf("%v %d", r, s.pointer)
						if s.from > 0 {
							rf := h.read(key, s.from)
							if !reflect.DeepEqual(rf, s.readFrom) {
								t.Errorf("step %d: read from %d: %v, want %v", i, s.from, rf, s.readFrom)
							}
							line += fmt.Sprint(rf)
						}
						if o := h.read(other, 1); len(o) != i+1 {
							t.Errorf("step %d: other journal read %v, want 1..%d", i, o, i+1)
						}
						got = append(got, line)
					}
					answers[m.name] = got
					st := h.j.Stats()
					if m.name == "caught-up" && st.StoreOnly != st.Views {
						t.Errorf("caught up: %d of %d views went past the store", st.Views-st.StoreOnly, st.Views)
					}
					if cache && st.KafkaReads != 0 {
						t.Errorf("head cache on: %d views read Kafka (%+v)", st.KafkaReads, st)
					}
					if !cache && st.KafkaReads != st.Views-st.StoreOnly {
						t.Errorf("head cache off: %d Kafka reads for %d views past the store", st.KafkaReads, st.Views-st.StoreOnly)
					}
					if m.name == "stopped" && st.StoreOnly != 0 {
						t.Errorf("stopped: %d views answered by an empty store alone", st.StoreOnly)
					}
				})
			}
			for _, m := range modes[1:] {
				if !reflect.DeepEqual(answers[m.name], answers[modes[0].name]) {
					t.Errorf("answers differ: %s %v, %s %v", modes[0].name, answers[modes[0].name], m.name, answers[m.name])
				}
			}
		})
	}
}
