package journal

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/x/kgox"
	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/journal/internal/loop"
	"github.com/streamd/streamd/journal/internal/sqlstore"
	"github.com/streamd/streamd/journal/internal/store"
	"github.com/streamd/streamd/record"
)

const childEnv = "STREAMD_JOURNAL_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "replicator" {
		os.Exit(runReplicatorChild())
	}
	os.Exit(m.Run())
}

// runReplicatorChild is the replicator process the crash test kills: a
// group consumer feeding the Replicator sink, committing after each write.
func runReplicatorChild() int {
	ctx := context.Background()
	st, err := OpenStore(ctx, os.Getenv("JOURNAL_STORE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rep, _ := NewReplicator(st, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	session, _ := time.ParseDuration(os.Getenv("JOURNAL_SESSION"))
	cl, err := kgo.NewClient(
		kgo.SessionTimeout(session),
		kgo.HeartbeatInterval(session/5),
		kgo.SeedBrokers(strings.Split(os.Getenv("JOURNAL_BROKERS"), ",")...),
		kgo.ConsumerGroup(os.Getenv("JOURNAL_GROUP")),
		kgo.ConsumeTopics(os.Getenv("JOURNAL_TOPIC")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(50*time.Millisecond),
		kgo.FetchMaxBytes(32<<10),
		kgo.FetchMaxPartitionBytes(16<<10),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := loop.Run(ctx, cl, rep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// genActions makes n action records over keys ids: mostly appends, some
// deletes, purges, marks, and a few malformed records.
func genActions(r *rand.Rand, topic string, keys, n int) []*kgo.Record {
	next := map[string]int64{}
	out := make([]*kgo.Record, 0, n)
	hdr := func(h action.Header) []kgo.RecordHeader {
		b, err := action.EncodeHeader(h)
		if err != nil {
			panic(err)
		}
		return []kgo.RecordHeader{{Key: action.HeaderKey, Value: b}}
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("key-%03d", r.IntN(keys))
		rec := &kgo.Record{Topic: topic, Key: []byte(id)}
		switch p := r.IntN(100); {
		case p < 70:
			from := next[id] + 1
			if r.IntN(20) == 0 {
				from = max(1, from-1-int64(r.IntN(3))) // another writer's: a conflict, unless it starts the journal
			}
			to := from + int64(r.IntN(5))
			next[id] = max(next[id], to)
			ev := &action.Events{}
			for s := from; s <= to; s++ {
				if r.IntN(5) == 0 {
					ev.Events = append(ev.Events, action.Event{SeqNr: s, Kind: action.PayloadBinary, Payload: []byte{byte(s)}})
				} else {
					ev.Events = append(ev.Events, action.Event{SeqNr: s, Tags: []string{"t"}, Kind: action.PayloadJSON, Payload: []byte(fmt.Sprintf(`{"n":%d}`, s))})
				}
			}
			v, f, err := action.EncodePayload(ev)
			if err != nil {
				panic(err)
			}
			rec.Value = v
			rec.Headers = hdr(action.Header{Kind: action.KindAppend, From: from, To: to, PayloadType: f})
		case p < 85:
			rec.Headers = hdr(action.Header{Kind: action.KindDelete, To: max(1, next[id]-int64(r.IntN(4)))})
		case p < 89:
			rec.Headers = hdr(action.Header{Kind: action.KindPurge})
			next[id] = 0
		case p < 98:
			rec.Headers = hdr(action.Header{Kind: action.KindMark, ID: fmt.Sprint(i)})
		default:
			rec.Headers = []kgo.RecordHeader{{Key: action.HeaderKey, Value: []byte(`{"append":{"range":"bad"}}`)}}
		}
		out = append(out, rec)
	}
	return out
}

type dumpStore interface {
	Dump(ctx context.Context, topic string) (map[store.Key]store.Dumped, error)
}

func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test is long")
	}
	stores := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "crash.db") },
		"postgres": func(t *testing.T) string {
			dsn := os.Getenv("STREAMD_TEST_POSTGRES_DSN")
			if dsn == "" {
				testenv.Missing(t, "PostgreSQL (STREAMD_TEST_POSTGRES_DSN; scripts/postgres start)")
			}
			return dsn
		},
	}
	for name, dsnOf := range stores {
		t.Run(name, func(t *testing.T) { crashTest(t, dsnOf(t)) })
	}
}

func crashTest(t *testing.T, dsn string) {
	ctx := context.Background()
	b := testenv.Kafka(t, kfake.GroupMinSessionTimeout(time.Second))
	session := "1500ms" // a killed member's partitions move on after this
	if b.Real {
		session = "6s"
	}
	topic := testenv.Topic(t, "crash")
	const partitions = 4
	b.CreateTopic(t, topic, partitions)
	cl := b.Client(t, kgo.ProducerLinger(5*time.Millisecond))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	recs := genActions(r, topic, 100, 10_000)

	// Produce while the replicator is killed and restarted.
	var prodErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < len(recs); i += 500 {
			if err := cl.ProduceSync(ctx, recs[i:min(i+500, len(recs))]...).FirstErr(); err != nil {
				prodErr = err
				return
			}
			time.Sleep(time.Second) // the actions flow while replicators die
		}
	}()

	st, err := OpenStore(ctx, dsn) // migrates before the children start
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), st)
	group := "crash-" + topic
	var logs bytes.Buffer
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=replicator", "JOURNAL_STORE="+dsn,
			"JOURNAL_BROKERS="+strings.Join(b.Seeds, ","), "JOURNAL_GROUP="+group, "JOURNAL_TOPIC="+topic, "JOURNAL_SESSION="+session)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	progress := func() int64 {
		var sum int64
		for p := int32(0); p < partitions; p++ {
			if ptr, ok, err := st.s.Pointer(ctx, topic, p); err == nil && ok {
				sum += ptr + 1
			}
		}
		return sum
	}
	kills, midway := 0, 0
	for i := 0; i < 8; i++ {
		before := progress()
		cmd := start()
		time.Sleep(time.Duration(2500+r.IntN(3000)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		kills++
		if after := progress(); after > before && after < int64(len(recs)) {
			midway++ // killed after it had replicated some, before the end
		}
	}
	if midway == 0 {
		t.Errorf("no kill happened while the replicator was making progress")
	}
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	// The model: every record applied alone, in partition order.
	model := NewMemoryStore()
	mrep, _ := NewReplicator(model, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	ends := map[int32]int64{}
	for _, rec := range recs {
		if _, err := mrep.Write(ctx, []record.Record{kgox.Record(rec)}); err != nil {
			t.Fatal(err)
		}
		ends[rec.Partition] = max(ends[rec.Partition], rec.Offset)
	}
	// A last replicator runs until it has caught up.
	cmd := start()
	deadline := time.Now().Add(90 * time.Second)
	for {
		done := true
		for p, end := range ends {
			ptr, ok, err := st.s.Pointer(ctx, topic, p)
			if err != nil {
				t.Fatal(err)
			}
			if !ok || ptr < end {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			t.Fatalf("replicator did not catch up; its output:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()

	want := model.s.(*store.Memory).Dump(topic)
	got, err := st.s.(dumpStore).Dump(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		for k, w := range want {
			if g := got[k]; !reflect.DeepEqual(g, w) {
				t.Errorf("%s: store %+v, model %+v", k.ID, g, w)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: in store, not in model", k.ID)
			}
		}
		t.Fatalf("store differs from model after %d kills", kills)
	}
	// Committed group offsets never pass what the store holds.
	adm := kadm.NewClient(cl)
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p, end := range ends {
		if o, ok := offs.Lookup(topic, p); ok && o.At > end+1 {
			t.Errorf("partition %d: committed %d past the end %d", p, o.At, end+1)
		}
	}
	t.Logf("%d kills (%d while replicating); %d journals, %d actions", kills, midway, len(want), len(recs))
}

var _ = sqlstore.SchemaVersion
