package fluid

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/record"
)

// harness is a broker, metadata, a bridge served over HTTP and a producer.
type harness struct {
	t      *testing.T
	broker *testenv.Broker
	meta   *Metadata
	bridge *Bridge
	srv    *httptest.Server
	prod   *kgo.Client
	topic  string
	suffix string // appended to group names (unique on a shared broker)
	state  string
	leader string
	keys   int // > 0: record id i has key "k<i%keys>" (keys repeat); 0: "order-<i>"
}

// key is the record key of id.
func (h *harness) key(id int) string {
	if h.keys > 0 {
		return "k" + strconv.Itoa(id%h.keys)
	}
	return "order-" + strconv.Itoa(id)
}

func newHarness(t *testing.T, partitions int32, versions int) *harness {
	t.Helper()
	meta, err := LoadMetadata(writeMetadata(t, versions))
	must(t, err)
	return newHarnessMeta(t, partitions, meta)
}

// newHarnessMeta is newHarness on metadata already loaded.
func newHarnessMeta(t *testing.T, partitions int32, meta *Metadata, opts ...Option) *harness {
	t.Helper()
	h := &harness{t: t, broker: testenv.Kafka(t), meta: meta}
	// The metadata names the topic "orders"; on a shared real broker every
	// test needs its own, so rename through a metadata copy.
	h.topic = "orders"
	if h.broker.Real {
		h.topic = testenv.Topic(t, "orders")
		h.meta = h.meta.renameTopic("orders", h.topic)
		h.suffix = strings.TrimPrefix(h.topic, "orders")
	}
	h.state = testenv.Topic(t, "fluid-state")
	h.leader = testenv.Topic(t, "fluid-leader")
	h.broker.CreateTopic(t, h.topic, partitions)
	h.prod = h.broker.Client(t, kgo.DefaultProduceTopic(h.topic))
	h.startBridge(opts...)
	return h
}

func (h *harness) startBridge(opts ...Option) {
	h.t.Helper()
	b, err := NewBridge(context.Background(), append([]Option{WithMetadata(h.meta), WithLoader(goLoader(0)), WithBrokers(h.broker.Seeds...),
		WithStateTopic(h.state), WithLeaderGroup(h.leader), WithLogger(slog.New(slog.NewTextHandler(h.t.Output(), nil)))}, opts...)...)
	must(h.t, err)
	h.bridge = b
	h.srv = httptest.NewServer(b.Handler())
	h.t.Cleanup(func() {
		h.srv.Close()
		testenv.Close(h.t, context.Background(), b)
	})
}

// produce writes orders with the given ids at schema version v (0: no header).
func (h *harness) produce(v int, ids ...int) {
	h.t.Helper()
	var rs []*kgo.Record
	for _, id := range ids {
		r := &kgo.Record{Key: []byte(h.key(id)), Value: order(max(v, 1), id)}
		if v > 0 {
			r.Headers = []kgo.RecordHeader{{Key: HeaderSchemaVersion, Value: []byte(strconv.Itoa(v))}}
		}
		rs = append(rs, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(h.t, h.prod.ProduceSync(ctx, rs...).FirstErr())
}

func (h *harness) consumer(group string, v int) *Consumer {
	return h.consumerMax(group, v, 0)
}

// g is the name of group in this test.
func (h *harness) g(group string) string { return group + h.suffix }

func (h *harness) consumerMax(group string, v, maxPoll int) *Consumer {
	h.t.Helper()
	group = h.g(group)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := NewConsumer(ctx, ConsumerConfig{BridgeURL: h.srv.URL, Topic: h.topic, Group: group, CompatibleVersion: v, MaxPollRecords: maxPoll,
		KafkaOptions: []kgo.Opt{kgo.SeedBrokers(h.broker.Seeds...)}, Logger: slog.New(slog.NewTextHandler(h.t.Output(), nil))})
	must(h.t, err)
	return c
}

// seen tracks what one logical consumer (across restarts) received.
type seen struct {
	t       *testing.T
	meta    *Metadata
	topic   string
	version int
	ids     map[int]int     // id -> times seen
	last    map[int32]int   // source partition -> last id
	lastOff map[int32]int64 // source partition -> last source offset
	byPart  map[int32][]int // ids in order per source partition
	byKey   map[string]int  // key -> last id
	key     func(int) string
	records []record.Record
}

func newSeen(t *testing.T, meta *Metadata, topic string, v int) *seen {
	return &seen{t: t, meta: meta, topic: topic, version: v, ids: map[int]int{}, last: map[int32]int{}, lastOff: map[int32]int64{},
		byPart: map[int32][]int{}, byKey: map[string]int{}, key: func(id int) string { return "order-" + strconv.Itoa(id) }}
}

// seen returns a seen for h's topic and keys.
func (h *harness) seen(v int) *seen {
	s := newSeen(h.t, h.meta, h.topic, v)
	s.key = h.key
	return s
}

// add checks one received record: valid at s.version, version header not
// newer, in order per partition.
func (s *seen) add(r record.Record) {
	s.t.Helper()
	v, err := recordVersion(&r, 1)
	if err != nil {
		s.t.Fatal(err)
	}
	if v > s.version {
		s.t.Fatalf("consumer on v%d got a v%d record: %s", s.version, v, r.Value)
	}
	// A record is in the shape of its version header (the consumer's
	// version, or an older one: old records are not upgraded).
	tv, err := s.meta.Topic(s.topic, v)
	must(s.t, err)
	if err := tv.Validate(r.Value); err != nil {
		s.t.Fatalf("record %s/%d@%d is not valid v%d: %v: %s", r.Topic, r.Partition, r.Offset, v, err, r.Value)
	}
	var m map[string]any
	must(s.t, json.Unmarshal(r.Value, &m))
	id := int(m["id"].(float64))
	// The payload must be the publisher's record, downgraded: check content.
	want := map[string]any{}
	must(s.t, json.Unmarshal(order(v, id), &want))
	if fmt.Sprint(m) != fmt.Sprint(want) {
		s.t.Fatalf("id %d at v%d: got %v, want %v", id, s.version, m, want)
	}
	if string(r.Key) != s.key(id) {
		s.t.Fatalf("id %d has key %q, want %q", id, r.Key, s.key(id))
	}
	// Ids were produced in increasing order: per key they must arrive so.
	if last, ok := s.byKey[string(r.Key)]; ok && id <= last {
		s.t.Fatalf("key %s: id %d after id %d (out of order or duplicate)", r.Key, id, last)
	}
	s.byKey[string(r.Key)] = id
	p, off := r.Partition, r.Offset
	if r.Topic != s.topic {
		p, off, err = sourcePosition(&r)
		must(s.t, err)
		if p != r.Partition {
			s.t.Fatalf("downgraded record from partition %d is on partition %d", p, r.Partition)
		}
	}
	if last, ok := s.lastOff[p]; ok && off <= last {
		s.t.Fatalf("partition %d: source offset %d after %d (out of order or duplicate)", p, off, last)
	}
	s.lastOff[p] = off
	s.ids[id]++
	s.byPart[p] = append(s.byPart[p], id)
	s.records = append(s.records, r)
}

// pollUntil polls c until n records were added or the deadline passes; it
// commits after every poll like a typical application.
func (s *seen) pollUntil(c *Consumer, n int) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(s.records) < n {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out with %d of %d records (switched=%v)", len(s.records), n, c.Downgraded())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
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
}

// exactly checks every id in [from, to) was seen exactly once and no other.
func (s *seen) exactly(from, to int) {
	s.t.Helper()
	for id := from; id < to; id++ {
		if s.ids[id] != 1 {
			s.t.Errorf("id %d seen %d times", id, s.ids[id])
		}
	}
	if len(s.ids) != to-from {
		s.t.Errorf("saw %d distinct ids, want %d", len(s.ids), to-from)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestSeedStory: consumer C1 on v3, publisher moves to v4.
func TestSeedStory(t *testing.T) { seedStory(t, newHarness(t, 2, 4)) }

func seedStory(t *testing.T, h *harness) {
	// C1 on v3 works through v3 records.
	h.produce(3, seq(0, 40)...)
	c1 := h.consumerMax("c1", 3, 7)
	if c1.DowngradeTopic() != h.bridge.DowngradeTopic(h.topic, 3) {
		t.Fatalf("downgrade topic %q", c1.DowngradeTopic())
	}
	s := newSeen(t, h.meta, h.topic, 3)
	s.pollUntil(c1, 40)
	if c1.Downgraded() {
		t.Fatal("switched while every record was v3")
	}

	// The publisher starts writing v4 (a lagging publisher instance still
	// writes some v3 in between).
	for id := 40; id < 120; id++ {
		v := 4
		if id%7 == 0 {
			v = 3
		}
		h.produce(v, id)
	}
	s.pollUntil(c1, 80)
	if !c1.Downgraded() {
		t.Fatal("C1 did not switch to the downgrade topic")
	}
	// C1 restarts mid-way.
	testenv.Close(t, context.Background(), c1)
	if len(s.records) >= 120 {
		t.Fatalf("C1 got %d records before the restart; want some left", len(s.records))
	}
	c1 = h.consumerMax("c1", 3, 7)
	s.pollUntil(c1, 120)
	if !c1.Downgraded() {
		t.Fatal("restarted C1 did not switch to the downgrade topic")
	}
	h.produce(4, seq(120, 150)...)
	s.pollUntil(c1, 150)
	s.exactly(0, 150)
	testenv.Close(t, context.Background(), c1)

	// C1 upgrades to v4: the bridge fast-forwards its main-topic offsets.
	req, _ := http.NewRequest(http.MethodDelete, h.srv.URL+"/fluid/topics/"+h.topic+"/groups/"+h.g("c1")+"/schema-version", nil)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body) // for the message below
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d %v", resp.StatusCode, body)
	}
	h.produce(4, seq(150, 170)...)
	c1v4 := h.consumer("c1", 4)
	s4 := newSeen(t, h.meta, h.topic, 4)
	s4.pollUntil(c1v4, 20)
	// Nothing more arrives: no record it already processed as v3 comes back.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	more, err := c1v4.Poll(ctx)
	cancel()
	must(t, err)
	for _, r := range more {
		s4.add(r)
	}
	s4.exactly(150, 170)
	if c1v4.Downgraded() {
		t.Fatal("v4 consumer switched")
	}
	testenv.Close(t, context.Background(), c1v4)

	// No group needs the v3 downgrade topic any more: republishing stops.
	waitFor(t, "republishing to stop", func() bool { return len(h.bridge.Status().Republishing) == 0 })
}

// TestTwoGroupsChained: groups on v2 and v3 at once, with
// the chain v4 -> v3 -> v2.
func TestTwoGroupsChained(t *testing.T) {
	h := newHarness(t, 3, 4)
	h.produce(3, seq(0, 30)...)
	g2 := h.consumer("g2", 2)
	g3 := h.consumer("g3", 3)
	s2 := newSeen(t, h.meta, h.topic, 2)
	s3 := newSeen(t, h.meta, h.topic, 3)
	s3.pollUntil(g3, 30)
	s2.pollUntil(g2, 30) // v3 records are already incompatible with v2
	if !g2.Downgraded() || g3.Downgraded() {
		t.Fatalf("switched: g2=%v g3=%v", g2.Downgraded(), g3.Downgraded())
	}
	h.produce(4, seq(30, 90)...)
	s2.pollUntil(g2, 90)
	s3.pollUntil(g3, 90)
	s2.exactly(0, 90)
	s3.exactly(0, 90)
	if !g3.Downgraded() {
		t.Fatal("g3 did not switch at the first v4 record")
	}
	st := h.bridge.Status()
	if len(st.Republishing) != 2 {
		t.Fatalf("republishing: %+v", st.Republishing)
	}
	testenv.Close(t, context.Background(), g2)
	testenv.Close(t, context.Background(), g3)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
