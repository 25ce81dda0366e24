package fluid

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Groups that arrive late: a consumer group that
// first appears after republishing for its version started, stopped, or
// moved on must still receive every record exactly once, in its version's
// shape, in order per key. Every test here runs on kfake and, with
// STREAMD_TEST_KAFKA_BROKERS, on the real broker.

// collect polls c until s has n records, or until nothing new arrived for
// quiet; then it polls once more for a moment so that a duplicate or a
// record too many shows. Like a typical application it commits after every
// poll.
func (s *seen) collect(c *Consumer, n int) {
	s.t.Helper()
	const quiet = 10 * time.Second
	last, lastAt := len(s.records), time.Now()
	poll := func(d time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		rs, err := c.Poll(ctx)
		cancel()
		must(s.t, err)
		for _, r := range rs {
			s.add(r)
		}
		c.Ack(rs)
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		must(s.t, c.Commit(ctx))
		cancel()
	}
	for len(s.records) < n && time.Since(lastAt) < quiet {
		poll(500 * time.Millisecond)
		if len(s.records) != last {
			last, lastAt = len(s.records), time.Now()
		}
	}
	poll(300 * time.Millisecond)
	if len(s.records) < n {
		s.t.Errorf("got %d records, want %d", len(s.records), n)
	}
}

// missing lists the ids in [from, to) not seen (at most 20, for messages).
func (s *seen) missing(from, to int) []int {
	var out []int
	for id := from; id < to && len(out) < 20; id++ {
		if s.ids[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// exactlyAll is exactly plus a readable summary of what is missing.
func (s *seen) exactlyAll(from, to int) {
	s.t.Helper()
	if m := s.missing(from, to); len(m) > 0 {
		n := 0
		for id := from; id < to; id++ {
			if s.ids[id] == 0 {
				n++
			}
		}
		s.t.Errorf("%d of %d ids never received, first ones %v", n, to-from, m)
	}
	for id, k := range s.ids {
		if k != 1 || id < from || id >= to {
			s.t.Errorf("id %d seen %d times (want once, in [%d, %d))", id, k, from, to)
		}
	}
}

// upgrade answers DELETE /fluid/topics/T/groups/G/schema-version; it fails
// the test unless the answer is 200.
func (h *harness) upgrade(group string) map[string]any {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, h.srv.URL+"/fluid/topics/"+h.topic+"/groups/"+h.g(group)+"/schema-version", nil)
	resp, err := http.DefaultClient.Do(req)
	must(h.t, err)
	defer testenv.Ignore(resp.Body.Close)
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body) // for the message below
	if resp.StatusCode != 200 {
		h.t.Fatalf("DELETE schema-version of %s: %d %v", group, resp.StatusCode, body)
	}
	return body
}

// TestLateGroupAfterUpgrade: g1 (v1) reads 1,000
// v1 and 1,000 v2 records through the downgrade topic and is upgraded;
// republishing for v1 stops; 500 more v2 records arrive; a new v1 group
// with no commits starts. It must get all 2,500, once each, as v1.
func TestLateGroupAfterUpgrade(t *testing.T) {
	h := newHarness(t, 3, 2)
	h.keys = 37
	h.produce(1, seq(0, 1000)...)
	g1 := h.consumer("g1", 1)
	s1 := h.seen(1)
	s1.collect(g1, 1000)
	h.produce(2, seq(1000, 2000)...)
	s1.collect(g1, 2000)
	s1.exactlyAll(0, 2000)
	if !g1.Downgraded() {
		t.Fatal("g1 did not switch to the downgrade topic")
	}
	testenv.Close(t, context.Background(), g1)
	h.upgrade("g1")
	waitFor(t, "republishing for v1 to stop", func() bool { return len(h.bridge.Status().Republishing) == 0 })
	h.produce(2, seq(2000, 2500)...)

	late := h.consumer("late", 1)
	sl := h.seen(1)
	sl.collect(late, 2500)
	sl.exactlyAll(0, 2500)
	testenv.Close(t, context.Background(), late)
}

// TestTwoLateGroups: two late groups arriving at different times, each
// after more records were written, the first still reading when the second
// arrives.
func TestTwoLateGroups(t *testing.T) {
	h := newHarness(t, 3, 2)
	h.keys = 29
	h.produce(1, seq(0, 600)...)
	g1 := h.consumer("g1", 1)
	s1 := h.seen(1)
	s1.collect(g1, 600)
	h.produce(2, seq(600, 1200)...)
	s1.collect(g1, 1200)
	testenv.Close(t, context.Background(), g1)
	h.upgrade("g1")
	h.produce(2, seq(1200, 1500)...)

	late1 := h.consumerMax("late1", 1, 50)
	sl1 := h.seen(1)
	sl1.collect(late1, 1500)
	h.produce(1, seq(1500, 1600)...) // a lagging v1 publisher
	h.produce(2, seq(1600, 1900)...)
	sl1.collect(late1, 1900)

	late2 := h.consumerMax("late2", 1, 50)
	sl2 := h.seen(1)
	// late2 starts while late1 is not done with what follows.
	h.produce(2, seq(1900, 2200)...)
	sl2.collect(late2, 2200)
	sl1.collect(late1, 2200)
	sl1.exactlyAll(0, 2200)
	sl2.exactlyAll(0, 2200)
	testenv.Close(t, context.Background(), late1)
	testenv.Close(t, context.Background(), late2)
}

// TestLateGroupWhileAnotherMidway: g1 is half-way through the downgrade
// topic when a new v1 group arrives; both get everything once.
func TestLateGroupWhileAnotherMidway(t *testing.T) {
	h := newHarness(t, 3, 2)
	h.keys = 31
	h.produce(1, seq(0, 900)...)
	g1 := h.consumerMax("g1", 1, 40)
	s1 := h.seen(1)
	s1.collect(g1, 900)
	h.produce(2, seq(900, 1800)...)
	s1.collect(g1, 1300) // mid-way through the v2 records
	if !g1.Downgraded() {
		t.Fatal("g1 did not switch")
	}
	late := h.consumerMax("late", 1, 40)
	sl := h.seen(1)
	sl.collect(late, 1800)
	h.produce(2, seq(1800, 2000)...)
	s1.collect(g1, 2000)
	sl.collect(late, 2000)
	s1.exactlyAll(0, 2000)
	sl.exactlyAll(0, 2000)
	testenv.Close(t, context.Background(), g1)
	testenv.Close(t, context.Background(), late)
}

// setOffsets commits group's offsets on topic to the current end of each
// partition, as an operator resetting a group "to latest" would.
func (h *harness) setOffsetsToEnd(group string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(h.prod)
	ends, err := adm.ListEndOffsets(ctx, h.topic)
	must(h.t, err)
	var offs kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) { offs.AddOffset(h.topic, o.Partition, o.Offset, -1) })
	resp, err := adm.CommitOffsets(ctx, h.g(group), offs)
	if err == nil {
		err = resp.Error()
	}
	must(h.t, err)
}

// TestLateGroupNeverHeld: the only v1 group starts at the end of the topic
// (its offsets were reset to latest), past v2 records, so the downgrade
// topic begins after them. A late v1 group from the start needs source
// records the downgrade topic never held.
func TestLateGroupNeverHeld(t *testing.T) {
	h := newHarness(t, 3, 2)
	h.keys = 23
	h.produce(1, seq(0, 300)...)
	h.produce(2, seq(300, 600)...)
	h.setOffsetsToEnd("g1")
	g1 := h.consumer("g1", 1)
	s1 := h.seen(1)
	h.produce(2, seq(600, 800)...)
	s1.collect(g1, 200)
	for id := 600; id < 800; id++ {
		if s1.ids[id] != 1 {
			t.Fatalf("g1: id %d seen %d times", id, s1.ids[id])
		}
	}
	late := h.consumerMax("late", 1, 64)
	sl := h.seen(1)
	sl.collect(late, 800)
	sl.exactlyAll(0, 800)
	// g1 keeps receiving what follows, once (the backfill it did not need
	// is dropped by source position).
	h.produce(2, seq(800, 900)...)
	s1.collect(g1, 300)
	sl.collect(late, 900)
	sl.exactlyAll(0, 900)
	testenv.Close(t, context.Background(), g1)
	testenv.Close(t, context.Background(), late)
}

// TestLateGroupNoLongerHeld: the downgrade topic's oldest records are gone
// (retention, simulated with DeleteRecords) while the main topic still has
// them; a late group needs them.
func TestLateGroupNoLongerHeld(t *testing.T) {
	h := newHarness(t, 2, 2)
	h.keys = 19
	h.produce(2, seq(0, 400)...)
	g1 := h.consumer("g1", 1)
	s1 := h.seen(1)
	s1.collect(g1, 400)
	testenv.Close(t, context.Background(), g1)
	// Delete the first half of every downgrade partition.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(h.prod)
	dt := h.bridge.DowngradeTopic(h.topic, 1)
	ends, err := adm.ListEndOffsets(ctx, dt)
	must(t, err)
	var offs kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) { offs.AddOffset(dt, o.Partition, o.Offset/2, -1) })
	del, err := adm.DeleteRecords(ctx, offs)
	must(t, err)
	must(t, del.Error())

	late := h.consumerMax("late", 1, 64)
	sl := h.seen(1)
	sl.collect(late, 400)
	sl.exactlyAll(0, 400)
	testenv.Close(t, context.Background(), late)
}

// TestLateGroupTransactional: the main topic is written in transactions
// (commit markers take offsets, so offsets are not contiguous) and one
// transaction is aborted (its records must never be delivered). The late
// group still gets every committed record once, and nothing else.
func TestLateGroupTransactional(t *testing.T) {
	h := newHarness(t, 3, 2)
	h.keys = 17
	txid := "fluid-txn-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tp := h.broker.Client(t, kgo.DefaultProduceTopic(h.topic), kgo.TransactionalID(txid))
	produceTxn := func(v int, ids []int, commit bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		must(t, tp.BeginTransaction())
		var rs []*kgo.Record
		for _, id := range ids {
			rs = append(rs, &kgo.Record{Key: []byte(h.key(id)), Value: order(v, id),
				Headers: []kgo.RecordHeader{{Key: HeaderSchemaVersion, Value: []byte(strconv.Itoa(v))}}})
		}
		must(t, tp.ProduceSync(ctx, rs...).FirstErr())
		must(t, tp.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	// Many small transactions: a marker after every few records.
	for i := 0; i < 300; i += 10 {
		produceTxn(1, seq(i, i+10), true)
	}
	g1 := h.consumer("g1", 1)
	s1 := h.seen(1)
	s1.collect(g1, 300)
	for i := 300; i < 600; i += 10 {
		produceTxn(2, seq(i, i+10), true)
	}
	produceTxn(2, seq(100000, 100010), false) // aborted: never delivered
	for i := 600; i < 700; i += 10 {
		produceTxn(2, seq(i, i+10), true)
	}
	s1.collect(g1, 700)
	s1.exactlyAll(0, 700)
	testenv.Close(t, context.Background(), g1)
	h.upgrade("g1")
	for i := 700; i < 800; i += 10 {
		produceTxn(2, seq(i, i+10), true)
	}
	late := h.consumerMax("late", 1, 33)
	sl := h.seen(1)
	sl.collect(late, 800)
	sl.exactlyAll(0, 800)
	testenv.Close(t, context.Background(), late)
}

// TestGroupMovesDown: a group moved back from v2 to v1 (a
// consumer rollback) through /fluid/downgrade-topic. Allowed: the answer
// names the version it left, the group keeps its committed positions (what
// it processed as v2 is not delivered again) and from there receives every
// record once, as v1, while another v1 group is mid-way.
func TestGroupMovesDown(t *testing.T) {
	h := newHarness(t, 3, 2)
	h.keys = 13
	h.produce(1, seq(0, 900)...)
	g1 := h.consumerMax("g1", 1, 40)
	s1 := h.seen(1)
	s1.collect(g1, 900)
	h.produce(2, seq(900, 1500)...)
	s1.collect(g1, 1000) // republishing for v1 is on, from g1's positions
	// g reads as v2 for a while: part of the v1 records only.
	gv2 := h.consumerMax("g", 2, 30)
	s2 := h.seen(2)
	s2.collect(gv2, 200)
	testenv.Close(t, context.Background(), gv2)
	// Roll g back to v1.
	var dt struct {
		Topic    string `json:"topic"`
		Previous int    `json:"previous-schema-version"`
	}
	httpGetJSON(t, h.srv.URL+"/fluid/downgrade-topic?topic="+h.topic+"&group="+h.g("g")+"&compatible-schema-version=1", &dt)
	if dt.Topic != h.bridge.DowngradeTopic(h.topic, 1) || dt.Previous != 2 {
		t.Errorf("moving g down: %+v, want topic %s and previous-schema-version 2", dt, h.bridge.DowngradeTopic(h.topic, 1))
	}
	if v := h.bridge.Status().Groups[h.topic][h.g("g")]; v != 1 {
		t.Errorf("status: g is on v%d, want v1", v)
	}
	gv1 := h.consumerMax("g", 1, 30)
	sv1 := h.seen(1)
	sv1.collect(gv1, 1500-len(s2.records))
	for id := range s2.ids {
		if sv1.ids[id] != 0 {
			t.Errorf("id %d, processed as v2, delivered again as v1", id)
		}
	}
	bad := 0
	for id := 0; id < 1500; id++ {
		if s2.ids[id]+sv1.ids[id] != 1 {
			if bad++; bad <= 10 {
				t.Errorf("id %d: %d times as v2, %d as v1, want once in all", id, s2.ids[id], sv1.ids[id])
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d ids in all not received exactly once", bad)
	}
	s1.collect(g1, 1500)
	s1.exactlyAll(0, 1500)
	testenv.Close(t, context.Background(), gv1)
	testenv.Close(t, context.Background(), g1)
}

// TestRebalanceMidway: a second member joins a v1 group while the first is
// half-way through the downgrade topic, and later leaves again; partitions
// move between them in both modes (main and downgrade topic). Together they
// receive every record; a record is received twice only when its partition
// moved after it was returned and before it was acknowledged (at most one
// poll per move), and each member receives each partition in order.
func TestRebalanceMidway(t *testing.T) {
	h := newHarness(t, 4, 2)
	h.keys = 41
	h.produce(1, seq(0, 400)...)
	h.produce(2, seq(400, 800)...)
	const maxPoll = 20
	a := h.consumerMax("g", 1, maxPoll)
	sa := h.seen(1)
	sa.collect(a, 500)
	b := h.consumerMax("g", 1, maxPoll)
	sb := h.seen(1)
	both := func(n int) {
		deadline := time.Now().Add(60 * time.Second)
		for len(sa.ids)+len(sb.ids) < n || distinct(sa, sb) < n {
			if time.Now().After(deadline) {
				t.Fatalf("timed out: %d distinct of %d", distinct(sa, sb), n)
			}
			for _, x := range []struct {
				c *Consumer
				s *seen
			}{{a, sa}, {b, sb}} {
				if x.c == nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				rs, err := x.c.Poll(ctx)
				cancel()
				must(t, err)
				for _, r := range rs {
					x.s.add(r)
				}
				x.c.Ack(rs)
				ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
				if err := x.c.Commit(ctx); err != nil {
					t.Logf("commit during a rebalance: %v", err) // retried by the next commit
				}
				cancel()
			}
		}
	}
	h.produce(2, seq(800, 1000)...)
	both(1000)
	if len(sb.records) == 0 {
		t.Fatal("the second member received nothing")
	}
	testenv.Close(t, context.Background(), a)
	a = nil
	h.produce(2, seq(1000, 1200)...)
	both(1200)
	dups := 0
	for id := range 1200 {
		switch k := sa.ids[id] + sb.ids[id]; {
		case k == 0:
			t.Errorf("id %d lost", id)
		case k > 1:
			dups += k - 1
		}
	}
	t.Logf("%d records received twice across the two moves", dups)
	if dups > 2*4*maxPoll {
		t.Errorf("%d records received twice; at most a poll's worth per moved partition expected", dups)
	}
	testenv.Close(t, context.Background(), b)
}

func distinct(ss ...*seen) int {
	all := map[int]bool{}
	for _, s := range ss {
		for id := range s.ids {
			all[id] = true
		}
	}
	return len(all)
}
