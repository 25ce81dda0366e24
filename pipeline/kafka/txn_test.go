package kafka_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// readAll counts the records of topic by seq header, as a reader with
// isolation level read_committed (committed true) or read_uncommitted
// would see them, until the end offsets of topic taken after idle of
// quiet are reached.
func readAll(t testing.TB, seeds []string, topic string, committed bool, want int, timeout time.Duration) map[int]int {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[int]int{}
	total := 0
	deadline := time.Now().Add(timeout)
	var full time.Time
	for time.Now().Before(deadline) {
		if total >= want {
			if full.IsZero() {
				full = time.Now()
			}
			if time.Since(full) >= 2*time.Second { // more would be duplicates
				break
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "seq" {
					n, _ := strconv.Atoi(string(h.Value))
					seen[n]++
					total++
				}
			}
		})
	}
	return seen
}

// gate is a transform that rejects poison records (value with "poison")
// and, while armed, blocks the call that holds record hold until
// released: an instance stuck mid-transaction.
type gate struct {
	hold     int
	armed    atomic.Bool
	blocked  chan struct{}
	release  chan struct{}
	once     sync.Once
	released sync.Once
}

func newGate(hold int) *gate {
	g := &gate{hold: hold, blocked: make(chan struct{}), release: make(chan struct{})}
	g.armed.Store(true)
	return g
}

func (g *gate) Transform(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		if g.armed.Load() {
			if v, _ := r.Header("seq"); string(v) == strconv.Itoa(g.hold) {
				g.once.Do(func() { close(g.blocked) })
				select {
				case <-g.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		if strings.Contains(string(r.Value), "poison") {
			out[i].Err = plugins.ErrTrap
			continue
		}
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

func (g *gate) open() { g.armed.Store(false); g.released.Do(func() { close(g.release) }) }

// eosInstance is one exactly-once pipeline of the test's group.
type eosInstance struct {
	p    *pipeline.Pipeline
	stop context.CancelFunc
	done chan error
}

func startEOS(t *testing.T, seeds []string, in, out, dlq, group, instance string, st plugins.Transformer) *eosInstance {
	t.Helper()
	src, err := kafka.NewSource(kafka.SourceConfig{Seeds: seeds, Topics: []string{in}, Group: group, InstanceID: instance,
		SessionTimeout: 10 * time.Second, Transactions: &kafka.Transactions{},
		Opts: []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: seeds, Topic: out, Transactional: src})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := kafka.NewSink(kafka.SinkConfig{Seeds: seeds, Topic: dlq, Transactional: src})
	if err != nil {
		t.Fatal(err)
	}
	p := pipeline.New(instance, src, sink, pipeline.WithBatch(100, 1<<20, 5*time.Millisecond), pipeline.WithWorkers(2),
		pipeline.WithTransactions(0, 300*time.Millisecond), pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dl),
		pipeline.WithStages(pipeline.Stage{Name: "gate", Transformer: st}), pipeline.WithShutdownTimeout(10*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	e := &eosInstance{p: p, stop: cancel, done: make(chan error, 1)}
	go func() { e.done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-e.done; err != nil {
			t.Errorf("Run: %v", err)
		}
		testenv.Close(t, context.Background(), sink)
		testenv.Close(t, context.Background(), dl)
	})
	return e
}

// TestExactlyOnceRebalance: an instance is stuck in the middle of a
// transaction that has written records; a second instance joins the
// group and takes partitions; the stuck one then goes on. Its transaction
// must abort (the group moved on since it began) and its records be read
// again: a read_committed reader sees every record of the input in the
// output exactly once, and each poison record in the DLQ exactly once,
// while a read_uncommitted reader sees the aborted copies too.
func TestExactlyOnceRebalance(t *testing.T) {
	b := testenv.Kafka(t)
	in, out, dlq := testenv.Topic(t, "in"), testenv.Topic(t, "out"), testenv.Topic(t, "dlq")
	for _, tp := range []string{in, out, dlq} {
		b.CreateTopic(t, tp, 4)
	}
	group := testenv.Topic(t, "g")
	const n = 8000
	prod := b.Client(t)
	recs := make([]*kgo.Record, 0, n)
	poison := map[int]bool{}
	for i := range n {
		v := `{"seq":` + strconv.Itoa(i) + `}`
		if i%997 == 500 {
			v, poison[i] = "poison", true
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k-" + strconv.Itoa(i)), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(i))}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	g := newGate(3000)
	a := startEOS(t, b.Seeds, in, out, dlq, group, "a", g)
	select {
	case <-g.blocked:
	case err := <-a.done:
		t.Fatalf("instance a ended before it reached record 3000: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("instance a did not reach record 3000 in 60 s")
	}
	// a's open transaction has written records: a read_uncommitted
	// reader sees them.
	waitFor(t, 30*time.Second, "records of a's open transaction in the log", func() bool {
		return len(readAll(t, b.Seeds, out, false, 1, time.Second)) > 0
	})
	bInst := startEOS(t, b.Seeds, in, out, dlq, group, "b", newGate(-1))
	waitFor(t, 60*time.Second, "instance b to commit a transaction", func() bool {
		s := bInst.p.Status()
		return s.Transactions != nil && s.Transactions.Committed > 0 && s.Out > 0
	})
	g.open()

	good := n - len(poison)
	got := readAll(t, b.Seeds, out, true, good, 2*time.Minute)
	missing, dup := 0, 0
	for i := range n {
		c := got[i]
		switch {
		case poison[i] && c != 0:
			t.Errorf("poison record %d in the output %d times", i, c)
		case !poison[i] && c == 0:
			missing++
		case c > 1:
			dup += c - 1
		}
	}
	sa, sb := a.p.Status(), bInst.p.Status()
	t.Logf("a: %+v; b: %+v", sa.Transactions, sb.Transactions)
	if missing > 0 || dup > 0 {
		t.Fatalf("read_committed output: %d of %d records missing, %d duplicates", missing, good, dup)
	}
	dead := readAll(t, b.Seeds, dlq, true, len(poison), time.Minute)
	for i := range poison {
		if dead[i] != 1 {
			t.Errorf("poison record %d in the DLQ %d times, want once", i, dead[i])
		}
	}
	if len(dead) != len(poison) {
		t.Errorf("DLQ holds %d distinct records, want the %d poison ones", len(dead), len(poison))
	}
	if sa.Transactions == nil || sa.Transactions.Aborted == 0 {
		t.Fatalf("instance a aborted no transaction (%+v): its stuck one should have been", sa.Transactions)
	}
	raw := readAll(t, b.Seeds, out, false, good, 10*time.Second)
	total := 0
	for _, c := range raw {
		total += c
	}
	t.Logf("read_uncommitted: %d records for %d distinct (aborted copies)", total, len(raw))
	if total <= good {
		t.Fatalf("read_uncommitted sees %d records, no aborted copy of the stuck transaction: the test did not exercise an abort", total)
	}
}
