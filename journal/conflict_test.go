package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/record"
)

// appendResult is what one of many concurrent writers was told.
type appendResult struct {
	seqNr int64
	err   error
}

// checkAcknowledged fails unless the journal reads back exactly the acked
// events (with their payloads: harness.read checks them) and the pointer is
// the highest of them.
func checkAcknowledged(t *testing.T, h *harness, key Key, acked []int64, when string) {
	t.Helper()
	slices.Sort(acked)
	got := h.read(key, 1)
	for _, s := range acked {
		if _, found := slices.BinarySearch(got, s); !found {
			t.Errorf("%s: acknowledged event %d is not read back (read %d events: %v)", when, s, len(got), got)
		}
	}
	for _, s := range got {
		if _, found := slices.BinarySearch(acked, s); !found {
			t.Errorf("%s: event %d is read back but its append was refused", when, s)
		}
	}
	if p := h.pointer(key); len(acked) > 0 && p != acked[len(acked)-1] {
		t.Errorf("%s: pointer %d, want %d (the highest acknowledged seqNr)", when, p, acked[len(acked)-1])
	}
}

// TestConcurrentAppends: 200 writers append one
// event each (seqNrs 1..200) to one journal at the same time. The journal
// cannot accept them all (seqNrs must increase in the partition's order),
// but every one it acknowledges must be read back, before and after
// replication, and every one it refuses must be refused with ErrConflict
// and never appear.
func TestConcurrentAppends(t *testing.T) {
	for _, cache := range []bool{true, false} {
		t.Run(map[bool]string{true: "head-cache", false: "no-cache"}[cache], func(t *testing.T) {
			var opts []Option
			if !cache {
				opts = append(opts, WithoutHeadCache())
			}
			h := newHarness(t, 1, opts...)
			key := Key{Topic: h.topic, ID: "concurrent"}
			const n = 200
			res := make([]appendResult, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := h.j.Append(h.ctx, key, ev(int64(i+1)))
					res[i] = appendResult{int64(i + 1), err}
				}()
			}
			wg.Wait()
			acked := ackedOf(t, res)
			checkAcknowledged(t, h, key, acked, "before replication")
			h.sync(0)
			checkAcknowledged(t, h, key, acked, "after replication")
		})
	}
}

func ackedOf(t *testing.T, res []appendResult) []int64 {
	t.Helper()
	var acked []int64
	for _, r := range res {
		switch {
		case r.err == nil:
			acked = append(acked, r.seqNr)
		case errors.Is(r.err, ErrConflict):
		default:
			t.Fatalf("append %d: %v", r.seqNr, r.err)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no append was acknowledged")
	}
	t.Logf("%d of %d appends acknowledged", len(acked), len(res))
	return acked
}

// TestHandlerConcurrentAppends is TestConcurrentAppends through the HTTP
// API: 200 concurrent POSTs of one event each; 200 means the event is
// kept, 409 that it was refused.
func TestHandlerConcurrentAppends(t *testing.T) {
	h := newHarness(t, 1)
	srv := httptest.NewServer(Handler(h.j))
	defer srv.Close()
	key := Key{Topic: h.topic, ID: "http-concurrent"}
	const n = 200
	res := make([]appendResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"seqNr":%d,"payload":{"n":%d}}`, i+1, i+1)
			resp, err := http.Post(srv.URL+"/journal/"+key.Topic+"/"+key.ID, "application/x-ndjson", strings.NewReader(body))
			if err != nil {
				res[i] = appendResult{int64(i + 1), err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				res[i] = appendResult{seqNr: int64(i + 1)}
			case 409:
				var e struct {
					Error string `json:"error"`
					SeqNr *int64 `json:"seqNr"`
				}
				if err := json.Unmarshal(b, &e); err != nil || e.SeqNr == nil || *e.SeqNr < 1 || e.Error == "" {
					res[i] = appendResult{int64(i + 1), fmt.Errorf("409 body %s: want {\"error\":...,\"seqNr\":N}", b)}
					return
				}
				res[i] = appendResult{int64(i + 1), fmt.Errorf("409: %s: %w", e.Error, ErrConflict)}
			default:
				res[i] = appendResult{int64(i + 1), fmt.Errorf("status %d: %s", resp.StatusCode, b)}
			}
		}()
	}
	wg.Wait()
	acked := ackedOf(t, res)
	checkAcknowledged(t, h, key, acked, "before replication")
	h.sync(0)
	checkAcknowledged(t, h, key, acked, "after replication")
}

// An append whose seqNrs are not above the journal's is refused with the
// journal's seqNr, and the stored events stay as they are.
func TestAppendAtOrBelowSeqNr(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.j.afterMark = func() { m.atMark(h) }
			key := Key{Topic: h.topic, ID: "below"}
			if _, err := h.j.Append(h.ctx, key, ev(1, 2, 3, 4, 5)); err != nil {
				t.Fatal(err)
			}
			m.afterWrite(h, 0, 3)
			for _, seqs := range [][]int64{{3}, {5}, {1, 2}, {4, 5, 6}, {5, 6}} {
				evs := ev(seqs...)
				for i := range evs {
					evs[i].Payload = []byte(`{"overwritten":true}`)
				}
				_, err := h.j.Append(h.ctx, key, evs)
				var ce *ConflictError
				if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) {
					t.Fatalf("append %v after 1..5: %v, want a ConflictError", seqs, err)
				}
				if ce.SeqNr != 5 {
					t.Fatalf("append %v: conflict names seqNr %d, want 5", seqs, ce.SeqNr)
				}
				m.afterWrite(h, 1, 3)
				// h.read checks every payload is the original one.
				if got := h.read(key, 1); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
					t.Fatalf("after refused append %v: read %v", seqs, got)
				}
				if p := h.pointer(key); p != 5 {
					t.Fatalf("after refused append %v: pointer %d, want 5", seqs, p)
				}
			}
			if _, err := h.j.Append(h.ctx, key, ev(6)); err != nil {
				t.Fatalf("append 6 after 1..5: %v", err)
			}
			h.sync(0)
			if got := h.read(key, 1); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
				t.Fatalf("read %v, want 1..6", got)
			}
		})
	}
}

func TestHandlerConflict(t *testing.T) {
	h := newHarness(t, 1)
	srv := httptest.NewServer(Handler(h.j))
	defer srv.Close()
	url := srv.URL + "/journal/" + h.topic + "/c"
	post := func(body string) (int, string) {
		resp, err := http.Post(url, "application/x-ndjson", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer testenv.Ignore(resp.Body.Close)
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := post(`{"seqNr":1}` + "\n" + `{"seqNr":2}`); st != 200 {
		t.Fatalf("append 1..2: %d %s", st, b)
	}
	st, b := post(`{"seqNr":2}`)
	if st != http.StatusConflict {
		t.Fatalf("append 2 again: %d %s, want 409", st, b)
	}
	var e struct {
		Error string `json:"error"`
		SeqNr int64  `json:"seqNr"`
	}
	if err := json.Unmarshal([]byte(b), &e); err != nil || e.SeqNr != 2 || !strings.Contains(e.Error, "2") {
		t.Fatalf("409 body %s: want {\"error\":...,\"seqNr\":2}", b)
	}
	if st, b := post(`{"seqNr":3}`); st != 200 {
		t.Fatalf("append 3: %d %s", st, b)
	}
}

// produceAppend writes an Append action record as another writer (a
// kafka-journal client) would, without the Journal's checks.
func produceAppend(t *testing.T, h *harness, id, payload string, seqs ...int64) int64 {
	t.Helper()
	ev := &action.Events{}
	for _, s := range seqs {
		ev.Events = append(ev.Events, action.Event{SeqNr: s, Kind: action.PayloadJSON, Payload: []byte(fmt.Sprintf(`{"n":%d,"by":%q}`, s, payload))})
	}
	v, f, err := action.EncodePayload(ev)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := action.EncodeHeader(action.Header{Kind: action.KindAppend, From: seqs[0], To: seqs[len(seqs)-1], PayloadType: f, Origin: "scala"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: h.topic, Key: []byte(id), Value: v, Headers: []kgo.RecordHeader{{Key: action.HeaderKey, Value: hb}}}
	if err := h.client.ProduceSync(h.ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return rec.Offset
}

// Records in Kafka whose seqNr range is not above the journal's (written by
// other writers, or by two writers racing) never overwrite stored events
// nor move the pointer back: readers and the replicator skip them alike,
// and the replicator counts and logs each with its topic/partition/offset.
func TestReplicatorConflictingRecords(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := newHarness(t, 1)
			h.rep.o.logger = slog.New(slog.NewTextHandler(&logs, nil))
			h.j.afterMark = func() { m.atMark(h) }
			const id = "foreign"
			key := Key{Topic: h.topic, ID: id}
			readBy := func() map[int64]string {
				t.Helper()
				out := map[int64]string{}
				if _, err := h.j.Read(h.ctx, key, 1, func(e Event) error {
					var p struct{ By string }
					_ = json.Unmarshal(e.Payload, &p)
					out[e.SeqNr] = p.By
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return out
			}
			produceAppend(t, h, id, "a", 1, 2, 3)
			m.afterWrite(h, 0, 4)
			o1 := produceAppend(t, h, id, "b", 2, 3, 4) // overlaps 2..3
			m.afterWrite(h, 1, 4)
			o2 := produceAppend(t, h, id, "c", 1) // below: would move the pointer back to 1
			m.afterWrite(h, 2, 4)
			produceAppend(t, h, id, "d", 5)
			m.afterWrite(h, 3, 4)
			want := map[int64]string{1: "a", 2: "a", 3: "a", 5: "d"}
			check := func(when string) {
				t.Helper()
				if got := readBy(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: read %v, want %v", when, got, want)
				}
				if p := h.pointer(key); p != 5 {
					t.Errorf("%s: pointer %d, want 5", when, p)
				}
			}
			check("as written")
			h.sync(0)
			check("replicated")
			if st := h.rep.Stats(); st.Conflicts != 2 {
				t.Errorf("replicator stats %+v, want 2 conflicts", st)
			}
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(h.rep.Collector())
			if n := counterValue(t, reg, "streamd_journal_replicator_records_total", "conflict"); n != 2 {
				t.Errorf("conflict metric %v, want 2", n)
			}
			for _, off := range []int64{o1, o2} {
				if want := fmt.Sprintf("topic=%s partition=0 offset=%d", h.topic, off); !strings.Contains(logs.String(), want) {
					t.Errorf("log does not name the conflicting record %q:\n%s", want, logs.String())
				}
			}
		})
	}
}

// A conflicting record goes to the quarantine topic too, so that it
// outlives the journal topic's retention.
func TestConflictQuarantined(t *testing.T) {
	h := newHarness(t, 1)
	var got []string
	h.rep.o.quarantine = func(_ context.Context, rec record.Record, reason error) error {
		got = append(got, fmt.Sprintf("%d %v", rec.Offset, reason))
		return nil
	}
	produceAppend(t, h, "q", "a", 1, 2)
	off := produceAppend(t, h, "q", "b", 2)
	h.sync(0)
	if len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprint(off)) || !strings.Contains(got[0], "conflict") {
		t.Fatalf("quarantined %q, want the record at offset %d as a conflict", got, off)
	}
}

// replicateUntil runs h's replicator on partition 0 in the background, as
// a replicator process would, until the returned stop is called.
func replicateUntil(t *testing.T, h *harness) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(h.ctx)
	cl := h.broker.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{h.topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(20*time.Millisecond))
	done := make(chan error, 1)
	go func() {
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				done <- nil
				return
			}
			var recs []record.Record
			fs.EachRecord(func(r *kgo.Record) {
				rec := record.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
				for _, x := range r.Headers {
					rec.Headers = append(rec.Headers, record.Header{Key: x.Key, Value: x.Value})
				}
				recs = append(recs, rec)
			})
			if len(recs) > 0 {
				if _, err := h.rep.Write(ctx, recs); err != nil && ctx.Err() == nil {
					done <- err
					return
				}
			}
		}
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("replicator: %v", err)
		}
	}
}

// Writers in different processes (Journals on their own clients, sharing
// nothing but Kafka and the store) racing on one journal while the
// replicator runs: each Append's verdict comes from the partition's order,
// so every acknowledged event is kept and every refused one is void.
func TestConcurrentAppendsAcrossJournals(t *testing.T) {
	h := newHarness(t, 1)
	key := Key{Topic: h.topic, ID: "racing"}
	const writers, n = 4, 200
	js := []*Journal{h.j}
	for range writers - 1 {
		j := New(h.broker.Client(t), h.store)
		testenv.CloseAtEnd(t, j)
		js = append(js, j)
	}
	stop := replicateUntil(t, h)
	res := make([]appendResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := js[i%writers].Append(h.ctx, key, ev(int64(i+1)))
			res[i] = appendResult{int64(i + 1), err}
		}()
	}
	wg.Wait()
	stop()
	acked := ackedOf(t, res)
	checkAcknowledged(t, h, key, acked, "while replicating")
	h.applied[0] = 0 // the store has what the background replicator did
	h.sync(0)
	checkAcknowledged(t, h, key, acked, "after replication")
	// The refused Appends that were written are exactly the conflicts the
	// replicator found: the writers' verdicts and the replicator's agree.
	var written int64
	for _, r := range res {
		var ce *ConflictError
		if errors.As(r.err, &ce) && ce.Written {
			written++
		}
	}
	if st := h.rep.Stats(); st.Conflicts != written {
		t.Errorf("replicator found %d conflicts, writers were refused %d written appends (%+v)", st.Conflicts, written, st)
	}
	t.Logf("%d refused appends were written to Kafka first", written)
}

// Writers that retry a refused Append with the seqNr the 409 names, plus
// one, build one gapless journal between them: a refusal always carries
// the journal's current seqNr.
func TestOptimisticWriters(t *testing.T) {
	h := newHarness(t, 1)
	key := Key{Topic: h.topic, ID: "optimistic"}
	const writers, each = 4, 25
	js := []*Journal{h.j}
	for range writers - 1 {
		j := New(h.broker.Client(t), h.store)
		testenv.CloseAtEnd(t, j)
		js = append(js, j)
	}
	stop := replicateUntil(t, h)
	var (
		mu      sync.Mutex
		acked   []int64
		refused int
		wg      sync.WaitGroup
		errs    = make(chan error, writers)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := int64(1)
			for ok := 0; ok < each; {
				_, err := js[w].Append(h.ctx, key, ev(next))
				var ce *ConflictError
				switch {
				case err == nil:
					mu.Lock()
					acked = append(acked, next)
					mu.Unlock()
					ok++
					next++
				case errors.As(err, &ce):
					if ce.SeqNr < next-1 {
						errs <- fmt.Errorf("refused %d with seqNr %d, below what this writer wrote", next, ce.SeqNr)
						return
					}
					mu.Lock()
					refused++
					mu.Unlock()
					next = ce.SeqNr + 1
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	stop()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := make([]int64, writers*each)
	for i := range want {
		want[i] = int64(i + 1)
	}
	slices.Sort(acked)
	if !slices.Equal(acked, want) {
		t.Fatalf("acknowledged %v, want 1..%d", acked, len(want))
	}
	checkAcknowledged(t, h, key, acked, "while replicating")
	t.Logf("%d appends acknowledged, %d refused", len(acked), refused)
}

// With the replicator stopped, an Append's check folds only the actions
// since this Journal's last Append to the journal, not the whole
// unreplicated partition: its cost does not grow with the replicator's lag.
func TestAppendCheckIndependentOfLag(t *testing.T) {
	h := newHarness(t, 1, WithoutHeadCache())
	key := Key{Topic: h.topic, ID: "lag"}
	other := Key{Topic: h.topic, ID: "other"}
	// Another process writes the other journal, so that the checks cannot
	// rely on knowing every record between (TestAppendCheckLocal).
	j2 := New(h.broker.Client(t), h.store)
	testenv.CloseAtEnd(t, j2)
	next := int64(0)
	appendOthers := func(n int) {
		t.Helper()
		for range n {
			next++
			if _, err := j2.Append(h.ctx, other, ev(next)); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendOthers(300) // the unreplicated head the first check reads
	if _, err := h.j.Append(h.ctx, key, ev(1)); err != nil {
		t.Fatal(err)
	}
	for s := int64(2); s <= 6; s++ {
		appendOthers(20)
		before := h.j.Stats().HeadRecords
		if _, err := h.j.Append(h.ctx, key, ev(s)); err != nil {
			t.Fatal(err)
		}
		// The other journal's 20 Appends, plus this one.
		if n := h.j.Stats().HeadRecords - before; n > 21 {
			t.Fatalf("append %d read %d records of the head, want at most 21 (since the last append of the journal)", s, n)
		}
	}
	h.sync(0)
	if got := h.read(key, 1); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("read %v", got)
	}
}

// When every record between an Append's base and itself was produced by
// the same Journal (one process writing the topic), the check reads
// nothing; the verdicts are the same (TestConcurrentAppendsAcrossJournals
// mixes both kinds of checks).
func TestAppendCheckLocal(t *testing.T) {
	h := newHarness(t, 1)
	keys := []Key{{Topic: h.topic, ID: "a"}, {Topic: h.topic, ID: "b"}, {Topic: h.topic, ID: "c"}}
	n := 0
	for s := int64(1); s <= 20; s++ {
		for _, k := range keys {
			if _, err := h.j.Append(h.ctx, k, ev(s)); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if s == 10 {
			if _, err := h.j.Purge(h.ctx, keys[0]); err != nil {
				t.Fatal(err)
			}
			if _, _, err := h.j.Delete(h.ctx, keys[1], 5); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A refused Append, found by the local check (written) or before.
	_, err := h.j.Append(h.ctx, keys[2], ev(3))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("append 3 after 20: %v", err)
	}
	st := h.j.Stats()
	if st.CheckLocal != int64(n) || st.CheckReads != 0 {
		t.Fatalf("stats %+v: want all %d checks local, none reading Kafka", st, n)
	}
	h.sync(0)
	if got := h.read(keys[0], 1); !slices.Equal(got, []int64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}) {
		t.Fatalf("purged then appended journal reads %v", got)
	}
	if got := h.read(keys[1], 1); len(got) != 15 || got[0] != 6 {
		t.Fatalf("journal deleted to 5 reads %v", got)
	}
}
