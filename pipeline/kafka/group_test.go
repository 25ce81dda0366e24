package kafka_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
)

// member is a Source of a test's group that fetches in the background.
type member struct {
	src  *kafka.Source
	mu   sync.Mutex
	msgs []pipeline.Msg
	stop context.CancelFunc
	done chan struct{}
}

func join(t *testing.T, seeds []string, topic, group string, revokeTimeout time.Duration) *member {
	t.Helper()
	src, err := kafka.NewSource(kafka.SourceConfig{Seeds: seeds, Topics: []string{topic}, Group: group, RevokeTimeout: revokeTimeout, SessionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := src.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	m := &member{src: src, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			msgs, err := src.FetchUpTo(ctx, 1000)
			if err != nil {
				return
			}
			m.mu.Lock()
			m.msgs = append(m.msgs, msgs...)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { m.close(t) })
	return m
}

func (m *member) close(t testing.TB) {
	if m.stop == nil {
		return
	}
	m.stop()
	<-m.done
	testenv.Close(t, context.Background(), m.src)
	m.stop = nil
}

func (m *member) fetched() []pipeline.Msg {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]pipeline.Msg(nil), m.msgs...)
}

func assignedCount(g kafka.GroupStatus) int {
	n := 0
	for _, ps := range g.Assigned {
		n += len(ps)
	}
	return n
}

// TestRevokeDrainsInFlight: when a second member joins, the partitions
// revoked from the first wait (at most the revoke timeout) for their
// in-flight records; acknowledged in time, they are committed before the
// new owner starts, which then reads none of them again. Not acknowledged
// in time, they are abandoned: the new owner reads them again, and the old
// member's late acknowledgement commits nothing (never committed late).
func TestRevokeDrainsInFlight(t *testing.T) {
	b := testenv.Kafka(t)
	for _, tc := range []struct {
		name    string
		ackIn   time.Duration // when the first member acknowledges what it fetched
		timeout time.Duration
	}{
		{"acked-in-time", 1500 * time.Millisecond, 20 * time.Second},
		{"abandoned", -1, 1 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, group := testenv.Topic(t, "in"), testenv.Topic(t, "g")
			createTopic(t, b.Seeds, topic, 4, nil)
			fillAt(t, b.Client(t), topic, 0, 400, time.Now())
			a := join(t, b.Seeds, topic, group, tc.timeout)
			waitFor(t, time.Minute, "the first member fetched every record", func() bool { return len(a.fetched()) == 400 })
			if g := a.src.Group(); assignedCount(g) != 4 || g.Generation < 0 || g.MemberID == "" {
				t.Fatalf("first member's group status %+v", g)
			}
			joined := time.Now()
			c := join(t, b.Seeds, topic, group, tc.timeout)
			waitFor(t, time.Minute, "the first member's revoke started", func() bool { return assignedCount(a.src.Group()) < 4 })
			if tc.ackIn > 0 {
				time.Sleep(tc.ackIn - time.Since(joined))
				a.src.Ack(a.fetched())
			}
			waitFor(t, time.Minute, "the second member was assigned partitions", func() bool { return assignedCount(c.src.Group()) > 0 })
			took := time.Since(joined)
			ga, gc := a.src.Group(), c.src.Group()
			t.Logf("second member assigned %v after %s; first kept %v (revokes %d)", gc.Assigned, took.Round(10*time.Millisecond), ga.Assigned, ga.Revokes)
			if assignedCount(ga)+assignedCount(gc) != 4 || ga.Revokes == 0 {
				t.Fatalf("after the rebalance: first %+v, second %+v", ga, gc)
			}
			if tc.ackIn > 0 && took < tc.ackIn {
				t.Fatalf("the second member got partitions after %s, before the first acknowledged its in-flight records (%s)", took, tc.ackIn)
			}
			// What the second member reads from its partitions: nothing of
			// the first 400 when they were committed on revoke; all of
			// them when they were abandoned.
			fillAt(t, b.Client(t), topic, 400, 400, time.Now())
			where := partitionOf(t, b.Seeds, topic, 800)
			mine := func(from, to int) int {
				n := 0
				for seq := from; seq < to; seq++ {
					if slices.Contains(gc.Assigned[topic], where[seq]) {
						n++
					}
				}
				return n
			}
			wantOld, wantFresh := 0, mine(400, 800)
			if tc.ackIn < 0 {
				wantOld = mine(0, 400)
			}
			old, fresh := 0, 0
			waitFor(t, time.Minute, "the second member read its partitions' new records", func() bool {
				old, fresh = 0, 0
				for _, m := range c.fetched() {
					if seqOf(m) < 400 {
						old++
					} else {
						fresh++
					}
				}
				return fresh >= wantFresh
			})
			t.Logf("second member read %d old records (want %d) and %d new (want %d)", old, wantOld, fresh, wantFresh)
			if old != wantOld || fresh != wantFresh {
				t.Fatalf("second member read %d of the first 400 records again (want %d) and %d new (want %d)", old, wantOld, fresh, wantFresh)
			}
			if tc.ackIn < 0 {
				// A late acknowledgement of the revoked partitions commits nothing.
				a.src.Ack(a.fetched())
				if err := a.src.Commit(context.Background()); err != nil {
					t.Fatalf("commit: %v", err)
				}
				adm := kadm.NewClient(b.Client(t))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				offs, err := adm.FetchOffsets(ctx, group)
				if err != nil {
					t.Fatal(err)
				}
				for tp, ps := range gc.Assigned {
					for _, p := range ps {
						if o, ok := offs.Lookup(tp, p); ok && o.At >= 0 {
							t.Fatalf("partition %d (now the second member's) was committed at %d by the first member's late ack", p, o.At)
						}
					}
				}
			}
		})
	}
}

func seqOf(m pipeline.Msg) int {
	for _, h := range m.Record.Headers {
		if h.Key == "seq" {
			n, _ := strconv.Atoi(string(h.Value))
			return n
		}
	}
	return -1
}

// partitionOf reads topic back until it saw seq 0..n-1 and returns the
// partition of each.
func partitionOf(t *testing.T, seeds []string, topic string, n int) map[int]int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int]int32{}
	deadline := time.Now().Add(time.Minute)
	for len(out) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "seq" {
					seq, _ := strconv.Atoi(string(h.Value))
					out[seq] = r.Partition
				}
			}
		})
	}
	if len(out) < n {
		t.Fatalf("read back %d of %d records of %s", len(out), n, topic)
	}
	return out
}

// TestPauseFetchKeepsAssignment: a paused source fetches nothing, keeps
// its membership (same member, generation and partitions: no rebalance)
// however long it stays paused, and on resume reads on from where it
// stopped, without a gap or a repeat.
func TestPauseFetchKeepsAssignment(t *testing.T) {
	b := testenv.Kafka(t)
	topic, group := testenv.Topic(t, "in"), testenv.Topic(t, "g")
	createTopic(t, b.Seeds, topic, 4, nil)
	fillAt(t, b.Client(t), topic, 0, 200, time.Now())
	src, err := kafka.NewSource(kafka.SourceConfig{Seeds: b.Seeds, Topics: []string{topic}, Group: group, SessionTimeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), src)
	ctx := context.Background()
	if err := src.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	fetch := func(d time.Duration, want int) []pipeline.Msg {
		var out []pipeline.Msg
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) && (want < 0 || len(out) < want) {
			fctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			msgs, _ := src.FetchUpTo(fctx, 1000)
			cancel()
			out = append(out, msgs...)
		}
		return out
	}
	got := fetch(time.Minute, 200)
	before := src.Group()
	src.PauseFetch()
	fillAt(t, b.Client(t), topic, 200, 200, time.Now())
	// Longer than the session timeout: membership must not depend on
	// fetching.
	if more := fetch(8*time.Second, -1); len(more) != 0 {
		t.Fatalf("fetched %d records while paused", len(more))
	}
	during := src.Group()
	if !during.Paused || during.Generation != before.Generation || during.MemberID != before.MemberID || during.Assignments != before.Assignments || during.Revokes != 0 {
		t.Fatalf("paused: group status %+v, before %+v (want the same membership)", during, before)
	}
	src.ResumeFetch()
	got = append(got, fetch(time.Minute, 400-len(got))...)
	seen := map[int]int{}
	for _, m := range got {
		seen[seqOf(m)]++
	}
	if missing, dup := missingDup(seen, 400); missing != 0 || dup != 0 || len(got) != 400 {
		t.Fatalf("after resume: %d records, %d missing, %d duplicates", len(got), missing, dup)
	}
	t.Logf("paused 8 s: generation %d kept, %d assignments, 400 of 400 read once", during.Generation, during.Assignments)
}

// TestFirstAssignmentGeneration: the first assignment's group status names
// its generation. The assign callback used to read the client from the
// Source's field, which Ready writes only after kgo.NewClient returns: a
// join quick enough (kfake, a static member) found it nil, reported
// generation 0 (log line and /v1/status) and raced with Ready (go test
// -race: TestTopicsRegex in internal/daemon/app).
func TestFirstAssignmentGeneration(t *testing.T) {
	b := testenv.Kafka(t)
	topic, group := testenv.Topic(t, "in"), testenv.Topic(t, "g")
	createTopic(t, b.Seeds, topic, 2, nil)
	src, err := kafka.NewSource(kafka.SourceConfig{Seeds: b.Seeds, Topics: []string{topic}, Group: group,
		InstanceDir: t.TempDir(), SessionTimeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), src)
	ctx := context.Background()
	if err := src.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for src.Group().Assignments == 0 && time.Now().Before(deadline) {
		fctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, _ = src.FetchUpTo(fctx, 10)
		cancel()
	}
	g := src.Group()
	if g.Assignments != 1 || g.Generation < 1 {
		t.Fatalf("after the first assignment: %+v (want generation >= 1)", g)
	}
}
