package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
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

type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var skipLine = regexp.MustCompile(`msg="records deleted by retention before they were read: skipped" topic=(\S+) partition=(\d+) from=(\d+) to=(\d+) skipped=(\d+)`)

// skips returns the skip log lines as [from, to, skipped].
func skips(log string) [][3]int64 {
	var out [][3]int64
	for _, m := range skipLine.FindAllStringSubmatch(log, -1) {
		var x [3]int64
		for i := range x {
			x[i], _ = strconv.ParseInt(m[3+i], 10, 64)
		}
		out = append(out, x)
	}
	return out
}

// TestRetentionSkipReported: records of a source partition that the
// broker deleted before the group read them (retention; here
// DeleteRecords, which moves the log start as retention does) are skipped,
// as Kafka consumers do (OFFSET_OUT_OF_RANGE, reset to the log start), but
// not silently: a warning names the topic, partition and the offsets
// skipped, Skipped counts them, and the lag counts only what still
// exists. Three ways: the committed offset deleted before a restart, the
// next offset deleted while the source reads, and the whole rest of the
// log deleted (no record comes after the gap). The regression: a 2020 backlog
// deleted by retention while streamd read it was skipped (~870,000
// records) without a log line, with /readyz 200.
func TestRetentionSkipReported(t *testing.T) {
	b := testenv.Kafka(t)
	topic, group := testenv.Topic(t, "ret"), testenv.Topic(t, "g")
	createTopic(t, b.Seeds, topic, 1, nil)
	prod := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One batch per record: a fetch of FetchMaxBytes(1) returns one.
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("v%d", i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm := kadm.NewClient(b.Client(t))
	deleteTo := func(off int64) {
		t.Helper()
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: topic, Partition: 0, At: off})
		resp, err := adm.DeleteRecords(ctx, o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("delete records below %d: %v", off, err)
		}
	}
	log := &lockedLog{}
	newSource := func() *kafka.Source {
		t.Helper()
		src, err := kafka.NewSource(kafka.SourceConfig{Seeds: b.Seeds, Topics: []string{topic}, Group: group, Partitions: 1,
			Logger: slog.New(slog.NewTextHandler(log, nil)), LagInterval: 200 * time.Millisecond,
			Opts: []kgo.Opt{kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		return src
	}
	// read fetches until offset until, acknowledging what it reads; it
	// returns the offsets read.
	read := func(src *kafka.Source, until int64) []int64 {
		t.Helper()
		var got []int64
		for len(got) == 0 || got[len(got)-1] < until {
			msgs, err := src.FetchUpTo(ctx, 1)
			if err != nil {
				t.Fatalf("fetch after %v: %v", got, err)
			}
			for _, m := range msgs {
				got = append(got, m.Record.Offset)
			}
			src.Ack(msgs)
		}
		return got
	}
	key := topic + "/0"

	// 1. The committed offset is deleted while no member runs.
	produce(0, 100)
	src := newSource()
	if got := read(src, 9); got[0] != 0 {
		t.Fatalf("first read from %d", got[0])
	}
	// Acknowledged up to 9 (and maybe a little more): commit, close.
	if err := src.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committed := int64(0)
	for _, s := range skips(log.String()) {
		t.Fatalf("a skip reported before any deletion: %v", s)
	}
	testenv.Close(t, context.Background(), src)
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); ok {
		committed = o.At
	}
	deleteTo(60)
	src = newSource()
	defer testenv.Close(t, context.Background(), src)
	if got := read(src, 60); got[0] != 60 {
		t.Fatalf("after the deletion read from %d, want 60", got[0])
	}
	s := skips(log.String())
	if len(s) != 1 || s[0] != [3]int64{committed, 60, 60 - committed} || src.Skipped()[key] != 60-committed {
		t.Fatalf("committed %d, deleted below 60: skip lines %v, Skipped %v", committed, s, src.Skipped())
	}

	// 2. The next offsets are deleted while the source reads.
	last := read(src, 99)
	produce(100, 100)
	last = append(last, read(src, 104)...)
	deleteTo(150)
	next := read(src, 150)
	at := last[len(last)-1] + 1 // the first offset the source did not read before the deletion
	if next[0] != 150 && next[0] != at {
		t.Fatalf("read %d after the deletion below 150 (last read %d)", next[0], at-1)
	}
	s = skips(log.String())
	if len(s) != 2 || s[1][1] != 150 || s[1][2] != s[1][1]-s[1][0] || s[1][0] < at || src.Skipped()[key] != 60-committed+s[1][2] {
		t.Fatalf("deleted below 150 after %d was read: skip lines %v, Skipped %v", at-1, s, src.Skipped())
	}

	// 3. The rest of the log is deleted: nothing comes after the gap.
	read(src, 170)
	deleteTo(200)
	var late []int64 // read after the deletion: buffered by the client before it
	fetch := func(d time.Duration) {
		fctx, fcancel := context.WithTimeout(ctx, d)
		defer fcancel()
		msgs, _ := src.FetchUpTo(fctx, 1)
		for _, m := range msgs {
			late = append(late, m.Record.Offset)
		}
		src.Ack(msgs)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(skips(log.String())) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no skip reported 30 s after the rest of the log was deleted; log:\n%s", log.String())
		}
		fetch(100 * time.Millisecond) // as the pipeline does
	}
	fetch(500 * time.Millisecond)
	s = skips(log.String())
	if len(s) != 3 || s[2][1] != 200 || s[2][0] <= 170 {
		t.Fatalf("rest of the log deleted after 170 was read: skip lines %v", s)
	}
	// A record the client had buffered before the deletion is not
	// skipped: Skipped takes it back when it comes after the skip line.
	total := int64(0)
	for _, x := range s {
		total += x[2]
	}
	for _, o := range late {
		if o >= 200 {
			t.Fatalf("read offset %d; nothing was produced after 199", o)
		}
		if o >= s[2][0] {
			total--
		}
	}
	if got := src.Skipped()[key]; got != total {
		t.Fatalf("Skipped %d, want %d (skip lines %v, read after the deletion %v)", got, total, s, late)
	}
	if lag := src.Lag()[key]; lag != 0 && lag != pipeline.LagUnknown {
		t.Fatalf("lag %d after the rest of the log was deleted, want 0", lag)
	}
	t.Logf("skip lines %v; Skipped %v", s, src.Skipped())
}
