package embedded

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var old2020 = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// startBroker starts a broker on a free port in a temporary data
// directory, closed with the test, logging into log when not nil.
func startBroker(t *testing.T, c Config, log *syncBuffer) (*Broker, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c.Listen = addr
	if c.DataDir == "" {
		c.DataDir = t.TempDir()
	}
	if log != nil {
		c.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	b, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, addr
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// produce writes n records of value size to topic's partition p, each
// batch of at most per records, with timestamp ts (zero: now).
func produce(t *testing.T, cl *kgo.Client, topic string, p int32, n, per, size int, ts time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for sent := 0; sent < n; {
		k := min(per, n-sent)
		rs := make([]*kgo.Record, k)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: topic, Partition: p, Value: bytes.Repeat([]byte{'v'}, size), Timestamp: ts}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		sent += k
	}
}

// manual is a producer that writes to the partition it is told and one
// batch per ProduceSync.
func manual(t *testing.T, addr string) *kgo.Client {
	return client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
}

// waitFor polls cond every 10 ms until it holds or d passes; it returns
// how long it took, or fails the test with what.
func waitFor(t *testing.T, d time.Duration, what func() string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("after %v: %s", d, what())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func logStart(b *Broker, topic string, p int32) int64 {
	if pi := b.PartitionInfo(topic, p); pi != nil {
		return pi.LogStartOffset
	}
	return -1
}

// TestRetentionDeletesOldRecordsWithinACheck: records older than the
// retention are gone within one check interval of being written, the
// newer ones after them stay, on a topic streamd creates with no configs
// of its own (kfake applies retention only to topics with a retention
// config of their own, and only hourly: nothing was ever deleted).
func TestRetentionDeletesOldRecordsWithinACheck(t *testing.T) {
	const check = time.Second
	b, addr := startBroker(t, Config{Retention: time.Hour, RetentionCheck: check}, nil)
	cl := manual(t, addr)
	createTopic(t, cl, "t", 1, nil)
	produce(t, cl, "t", 0, 100, 10, 100, old2020)
	produce(t, cl, "t", 0, 100, 10, 100, time.Time{})
	took := waitFor(t, check+2*time.Second, func() string {
		return fmt.Sprintf("log start %d, want 100 (the 2020 records deleted)", logStart(b, "t", 0))
	}, func() bool { return logStart(b, "t", 0) == 100 })
	t.Logf("the 2020 records were deleted %v after they were written (check interval %v)", took.Round(time.Millisecond), check)
	if took > check+500*time.Millisecond {
		t.Errorf("deleted after %v, want within one check interval (%v, +500ms for the check itself)", took, check)
	}
	time.Sleep(2 * check)
	if ls, hw := logStart(b, "t", 0), b.PartitionInfo("t", 0).HighWatermark; ls != 100 || hw != 200 {
		t.Fatalf("log %d..%d two checks later, want 100..200: the new records must stay", ls, hw)
	}
	var topic *TopicStats
	s := b.Stats()
	for i := range s.Topics {
		if s.Topics[i].Topic == "t" {
			topic = &s.Topics[i]
		}
	}
	if topic == nil || topic.Records != 100 || topic.Deleted[reasonTime] != 100 || topic.RetentionMs != time.Hour.Milliseconds() ||
		topic.OldestMs < time.Now().Add(-time.Minute).UnixMilli() {
		t.Fatalf("stats of t: %+v", topic)
	}
}

// TestRetentionOldRecordKeepsNewerOnesBefore: as in Kafka, time retention
// deletes a prefix of the log: a record with an old timestamp written
// after new ones does not take them with it (kfake's own retention
// deletes every batch up to the last expired one).
func TestRetentionOldRecordKeepsNewerOnesBefore(t *testing.T) {
	const check = 200 * time.Millisecond
	b, addr := startBroker(t, Config{Retention: time.Hour, RetentionCheck: check}, nil)
	cl := manual(t, addr)
	createTopic(t, cl, "t", 1, nil)
	produce(t, cl, "t", 0, 10, 10, 100, time.Time{})
	produce(t, cl, "t", 0, 10, 10, 100, old2020)
	produce(t, cl, "t", 0, 10, 10, 100, time.Time{})
	time.Sleep(5 * check)
	if ls := logStart(b, "t", 0); ls != 0 {
		t.Fatalf("log start %d, want 0: a new record came first", ls)
	}
}

// TestRetentionHonoursTopicConfigs: a topic's own retention.ms=-1 keeps
// its old records (as the fault suite's topics ask), and a cleanup.policy
// of compact alone keeps them from time retention too.
func TestRetentionHonoursTopicConfigs(t *testing.T) {
	const check = 200 * time.Millisecond
	b, addr := startBroker(t, Config{Retention: time.Hour, RetentionBytes: 1000, RetentionCheck: check}, nil)
	cl := manual(t, addr)
	forever, compact := "-1", "compact"
	createTopic(t, cl, "forever", 1, map[string]*string{"retention.ms": &forever, "retention.bytes": &forever})
	createTopic(t, cl, "compacted", 1, map[string]*string{"cleanup.policy": &compact})
	createTopic(t, cl, "default", 1, nil)
	for _, topic := range []string{"forever", "compacted", "default"} {
		produce(t, cl, topic, 0, 50, 10, 100, old2020)
	}
	waitFor(t, 5*time.Second, func() string { return fmt.Sprintf("log start of default %d, want 50", logStart(b, "default", 0)) },
		func() bool { return logStart(b, "default", 0) == 50 })
	time.Sleep(3 * check)
	for _, topic := range []string{"forever", "compacted"} {
		if ls := logStart(b, topic, 0); ls != 0 {
			t.Errorf("%s: log start %d, want 0", topic, ls)
		}
	}
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

// TestRetentionClosesSegmentFiles: kfake keeps a read handle open on every
// sealed segment a fetch has read, until retention deletes the segment;
// with retention, the handles of the deleted segments close and the open
// files fall back.
func TestRetentionClosesSegmentFiles(t *testing.T) {
	const check = 200 * time.Millisecond
	b, addr := startBroker(t, Config{SegmentBytes: 4 << 10, RetentionCheck: check}, nil)
	cl := manual(t, addr)
	forever := "-1"
	createTopic(t, cl, "t", 1, map[string]*string{"retention.bytes": &forever})
	// Read the topic once to warm up the client's connections.
	produce(t, cl, "t", 0, 1, 1, 100, time.Time{})
	consume := func() {
		t.Helper()
		c := client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxPartitionBytes(1024))
		end := b.PartitionInfo("t", 0).HighWatermark
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for n := int64(0); n < end-logStart(b, "t", 0); {
			fs := c.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			n += int64(fs.NumRecords())
		}
		c.Close()
	}
	consume()
	before := openFiles(t)
	produce(t, cl, "t", 0, 400, 1, 400, time.Time{}) // ~190 KiB: ~45 segments
	consume()
	read := openFiles(t)
	segments := b.Stats().Segments
	t.Logf("open files: %d before, %d after reading ~45 sealed segments (%d segment files)", before, read, segments)
	if read < before+20 {
		t.Fatalf("open files %d -> %d: reading the sealed segments should have opened them (kfake changed?)", before, read)
	}
	// Keep about two segments.
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: kadm.StringPtr("8192")}}, "t")
	if err == nil {
		_, err = rs.On("t", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	// What stays open: the read handles of the two or three segments
	// retained, which the reading opened.
	waitFor(t, 5*time.Second, func() string {
		return fmt.Sprintf("open files %d, want at most %d (before reading) + 6; log start %d", openFiles(t), before, logStart(b, "t", 0))
	}, func() bool { return openFiles(t) <= before+6 })
	t.Logf("open files back to %d after retention; log start %d, %d segment files", openFiles(t), logStart(b, "t", 0), b.Stats().Segments)
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestRetentionBoundsIndexMemory: kfake keeps a 72-byte index entry in
// memory for every stored batch until its segment is deleted; with
// retention the broker's heap is bounded by what it retains, not by what
// was ever written. (Without retention: +33.7 MiB for 300,000 batches;
// with it +3.3 MiB, of which ~2 MiB are the indexes of deleted segments
// kfake holds until its list of segments grows again.)
func TestRetentionBoundsIndexMemory(t *testing.T) {
	const batches, parts = 300_000, 16
	b, addr := startBroker(t, Config{SegmentBytes: 64 << 10, RetentionBytes: 64 << 10, RetentionCheck: 200 * time.Millisecond}, nil)
	cl := client(t, addr, kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(512), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DisableIdempotentWrite(),
		kgo.MaxProduceRequestsInflightPerBroker(8), kgo.MaxBufferedRecords(20000), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	createTopic(t, cl, "t", parts, nil)
	// One record a batch: two do not fit in 512 bytes.
	value := bytes.Repeat([]byte{'v'}, 300)
	produce(t, cl, "t", -1, 1000, 1000, 300, time.Time{})
	before := heapInUse()
	start := time.Now()
	var wg sync.WaitGroup
	var perr error
	var mu sync.Mutex
	for range batches - 1000 {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: "t", Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				perr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if perr != nil {
		t.Fatal(perr)
	}
	took := time.Since(start)
	// A check that started after the last record: the one that deletes
	// what the load of a busy machine may have let pile up.
	end := time.Now()
	waitFor(t, 30*time.Second, func() string { return "no retention check after the writes" }, func() bool { return b.Stats().At.After(end) })
	after := heapInUse()
	var written int64
	for p := range int32(parts) {
		written += b.PartitionInfo("t", p).HighWatermark
	}
	s := b.Stats()
	grew := int64(after) - int64(before)
	t.Logf("%d records in %v: heap in use %.1f -> %.1f MiB (%+.1f MiB); the index of every batch written would be %.1f MiB; estimate of the retained index %.2f MiB (%d segment files)",
		written, took.Round(time.Millisecond), float64(before)/(1<<20), float64(after)/(1<<20), float64(grew)/(1<<20),
		float64(written*IndexEntryBytes)/(1<<20), float64(s.IndexBytes)/(1<<20), s.Segments)
	if limit := written * IndexEntryBytes / 3; grew > limit {
		t.Fatalf("heap in use grew %d bytes over %d records (one a batch), want below %d: a third of the index of what was written", grew, written, limit)
	}
}

// TestIndexEstimate: the estimate of the index's memory counts 72 bytes a
// stored batch, from the .idx files of the kfake version in go.mod.
func TestIndexEstimate(t *testing.T) {
	b, addr := startBroker(t, Config{RetentionCheck: 100 * time.Millisecond}, nil)
	cl := manual(t, addr)
	createTopic(t, cl, "t", 2, nil)
	produce(t, cl, "t", 0, 300, 1, 10, time.Time{})
	produce(t, cl, "t", 1, 200, 2, 10, time.Time{})
	want := int64(400 * IndexEntryBytes)
	waitFor(t, 5*time.Second, func() string {
		return fmt.Sprintf("index estimate %d, want %d (400 batches)", b.Stats().IndexBytes, want)
	},
		func() bool { return b.Stats().IndexBytes == want })
}

// TestRetentionSkipWarning: records retention deletes before a consumer
// group read them are logged and counted per group.
func TestRetentionSkipWarning(t *testing.T) {
	var log syncBuffer
	b, addr := startBroker(t, Config{Retention: time.Hour, RetentionCheck: 200 * time.Millisecond}, &log)
	cl := manual(t, addr)
	forever := "-1"
	createTopic(t, cl, "t", 1, map[string]*string{"retention.ms": &forever})
	produce(t, cl, "t", 0, 100, 10, 100, old2020)
	produce(t, cl, "t", 0, 10, 10, 100, time.Time{})
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var offs kadm.Offsets
	offs.AddOffset("t", 0, 30, -1)
	if err := adm.CommitAllOffsets(ctx, "slow", offs); err != nil {
		t.Fatal(err)
	}
	var caught kadm.Offsets
	caught.AddOffset("t", 0, 105, -1)
	if err := adm.CommitAllOffsets(ctx, "caught-up", caught); err != nil {
		t.Fatal(err)
	}
	// The topic's retention falls to the broker's (1h): the 2020 records go.
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "t")
	if err == nil {
		_, err = rs.On("t", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() string { return fmt.Sprintf("log start %d, want 100", logStart(b, "t", 0)) },
		func() bool { return logStart(b, "t", 0) == 100 })
	time.Sleep(300 * time.Millisecond)
	ms := gather(t, b)
	if got := ms[`streamd_embedded_retention_skipped_records_total{group="slow",topic="t"}`]; got != 70 || len(ms) == 0 {
		t.Fatalf("skipped records of slow: %v, want 70 (metrics: %v)", got, ms)
	}
	for k := range ms {
		if strings.Contains(k, "caught-up") {
			t.Fatalf("a series for the caught-up group: %s", k)
		}
	}
	out := log.String()
	if !strings.Contains(out, `msg="embedded broker retention deleted records a consumer group had not read" topic=t group=slow skipped=70 last=0@30..100(time)`) ||
		strings.Contains(out, "group=caught-up") {
		t.Fatalf("log:\n%s", out)
	}
}

// TestDiskBudget: past DiskWarnRatio of the budget the broker warns; past
// the budget it deletes the oldest records of the largest partitions
// until the data directory fits, and a small topic keeps its records.
func TestDiskBudget(t *testing.T) {
	var log syncBuffer
	const budget = 2 << 20
	b, addr := startBroker(t, Config{Retention: -1, RetentionBytes: -1, SegmentBytes: 32 << 10, DiskBudget: budget,
		RetentionCheck: 100 * time.Millisecond}, &log)
	cl := manual(t, addr)
	createTopic(t, cl, "big", 1, nil)
	createTopic(t, cl, "small", 1, nil)
	produce(t, cl, "small", 0, 100, 10, 1000, time.Time{}) // ~100 KB
	produce(t, cl, "big", 0, 1600, 20, 1000, time.Time{})  // ~1.6 MB: 85% with small
	waitFor(t, 5*time.Second, func() string { return "no warning near the budget:\n" + log.String() },
		func() bool { return strings.Contains(log.String(), "embedded broker disk use is near its budget") })
	if ls := logStart(b, "big", 0); ls != 0 {
		t.Fatalf("big: log start %d before the budget was reached", ls)
	}
	produce(t, cl, "big", 0, 1600, 20, 1000, time.Time{}) // past the budget
	over := time.Now()
	waitFor(t, 5*time.Second, func() string {
		s := b.Stats()
		return fmt.Sprintf("disk %d at %v, want at most the budget %d", s.DiskBytes, s.At, budget)
	}, func() bool {
		s := b.Stats()
		return s.At.After(over) && s.DiskBytes <= budget && logStart(b, "big", 0) > 0
	})
	s := b.Stats()
	t.Logf("disk %d of %d; big log start %d of %d; small log start %d", s.DiskBytes, budget, logStart(b, "big", 0),
		b.PartitionInfo("big", 0).HighWatermark, logStart(b, "small", 0))
	if logStart(b, "big", 0) == 0 || logStart(b, "small", 0) != 0 {
		t.Fatalf("big should have lost its oldest records, small none")
	}
	if !strings.Contains(log.String(), "embedded broker is over its disk budget") {
		t.Fatalf("log:\n%s", log.String())
	}
	ms := gather(t, b)
	for _, k := range []string{"streamd_embedded_disk_budget_used_ratio", `streamd_embedded_retention_deleted_records_total{reason="disk_budget",topic="big"}`,
		"streamd_embedded_index_memory_bytes", `streamd_embedded_log_start_offset{partition="0",topic="big"}`} {
		if ms[k] <= 0 {
			t.Errorf("metric %s = %v, want > 0", k, ms[k])
		}
	}
	if r := ms["streamd_embedded_disk_budget_used_ratio"]; r > 1 {
		t.Errorf("disk budget used ratio %v, want at most 1", r)
	}
}

// gather returns the broker's metrics as series{labels} -> value.
func gather(t *testing.T, b *Broker) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			k := mf.GetName()
			if len(m.GetLabel()) > 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				k += "{" + strings.Join(ls, ",") + "}"
			}
			out[k] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return 0
}

// TestRetentionAfterRestart: what retention deleted stays deleted after
// the broker restarts on its data directory.
func TestRetentionAfterRestart(t *testing.T) {
	dir := t.TempDir()
	c := Config{DataDir: dir, Retention: time.Hour, SegmentBytes: 4 << 10, RetentionCheck: 100 * time.Millisecond}
	b, addr := startBroker(t, c, nil)
	cl := manual(t, addr)
	createTopic(t, cl, "t", 1, nil)
	produce(t, cl, "t", 0, 100, 10, 100, old2020)
	produce(t, cl, "t", 0, 10, 10, 100, time.Time{})
	waitFor(t, 5*time.Second, func() string { return fmt.Sprintf("log start %d, want 100", logStart(b, "t", 0)) },
		func() bool { return logStart(b, "t", 0) == 100 })
	cl.Close()
	b.Close()
	c.Retention = -1
	b2, _ := startBroker(t, c, nil)
	if ls := logStart(b2, "t", 0); ls != 100 {
		t.Fatalf("log start %d after a restart, want 100", ls)
	}
}

func TestWaterLevel(t *testing.T) {
	for _, c := range []struct {
		sizes []int64
		total int64
		level int64
		ok    bool
	}{
		{[]int64{10, 20, 30}, 60, 0, false},
		{[]int64{10, 20, 30}, 50, 20, true},
		{[]int64{10, 20, 30}, 30, 10, true},
		{[]int64{10, 20, 30}, 0, 0, true},
		{[]int64{100, 1}, 51, 50, true},
		{nil, 0, 0, false},
	} {
		level, ok := waterLevel(c.sizes, c.total)
		if level != c.level || ok != c.ok {
			t.Errorf("waterLevel(%v, %d) = %d, %v; want %d, %v", c.sizes, c.total, level, ok, c.level, c.ok)
		}
	}
}
