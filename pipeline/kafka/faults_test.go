package kafka_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/tests/testenv/faultproxy"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/record"
)

// Helpers for the fault tests: records carry key k-<seq> and header
// seq=<seq>, so the output can be checked for missing and duplicate
// records by sequence.

var (
	ts2020   = time.Date(2020, 3, 1, 12, 0, 0, 0, time.UTC)
	hoursAgo = time.Now().Add(-5 * time.Hour)
)

// fillAt produces n records (seq from..from+n-1) to topic with the given
// CreateTime timestamp.
func fillAt(t testing.TB, cl *kgo.Client, topic string, from, n int, ts time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("k-" + strconv.Itoa(i)), Value: []byte(fmt.Sprintf(`{"seq":%d}`, i)),
			Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(i))}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("fill %s: %v", topic, err)
	}
}

// seqRecords returns n sink input records (seq from..from+n-1) with
// timestamp ts, spread over partitions partitions.
func seqRecords(from, n int, partitions int32, ts time.Time) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		s := from + i
		out[i] = record.Record{Key: []byte("k-" + strconv.Itoa(s)), Value: []byte(fmt.Sprintf(`{"seq":%d}`, s)), Timestamp: ts,
			Topic: "in", Partition: int32(s) % partitions, Offset: int64(s),
			Headers: []record.Header{{Key: "seq", Value: []byte(strconv.Itoa(s))}}}
	}
	return out
}

// tally counts the records of topic by seq header, reading until want
// distinct sequences were seen and then for settle more (to catch
// duplicates), or until timeout.
func tally(t testing.TB, seeds []string, topic string, want int, settle, timeout time.Duration) map[int]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[int]int{}
	deadline := time.Now().Add(timeout)
	var full time.Time
	for time.Now().Before(deadline) {
		if len(seen) >= want {
			if full.IsZero() {
				full = time.Now()
			}
			if time.Since(full) >= settle {
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
				}
			}
		})
	}
	return seen
}

// missingDup returns how many of seq 0..n-1 are missing from seen and how
// many extra copies it holds.
func missingDup(seen map[int]int, n int) (missing, dup int) {
	for i := 0; i < n; i++ {
		switch c := seen[i]; {
		case c == 0:
			missing++
		case c > 1:
			dup += c - 1
		}
	}
	return missing, dup
}

func createTopic(t testing.TB, seeds []string, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// TestSinkOldTimestamps: records whose timestamps are hours or years old
// (a backlog, a replay, a file of old events) are written at once, with
// their timestamps kept; on a LogAppendTime topic the broker's time wins.
// The regression: the sink's 30 s record delivery timeout, which
// franz-go measures from the record's timestamp, expired every such
// record before it was sent.
func TestSinkOldTimestamps(t *testing.T) {
	b := testenv.Kafka(t)
	for _, tc := range []struct {
		name string
		ts   time.Time
		conf map[string]string
	}{
		{"2020", ts2020, nil},
		{"5h-ago", hoursAgo, nil},
		{"2020-to-LogAppendTime-topic", ts2020, map[string]string{"message.timestamp.type": "LogAppendTime"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := testenv.Topic(t, "old")
			createTopic(t, b.Seeds, topic, 2, tc.conf)
			sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: b.Seeds, Topic: topic, SamePartition: true, Partitions: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer testenv.Close(t, context.Background(), sink)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			errs, err := sink.Write(ctx, seqRecords(0, 8, 2, tc.ts))
			if err != nil {
				t.Fatalf("write of 8 records with timestamp %s: %v", tc.ts.Format(time.RFC3339), err)
			}
			for i, e := range errs {
				if e != nil {
					t.Fatalf("record %d: %v", i, e)
				}
			}
			cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			var got []*kgo.Record
			for len(got) < 8 && ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
			}
			if len(got) != 8 {
				t.Fatalf("read %d of 8 records", len(got))
			}
			for _, r := range got {
				if tc.conf == nil && !r.Timestamp.Equal(tc.ts.Truncate(time.Millisecond)) {
					t.Errorf("record %s: timestamp %s, want the source's %s", r.Key, r.Timestamp, tc.ts)
				}
				// kfake keeps the producer's timestamp type: only Kafka applies the topic's.
				if tc.conf != nil && b.Real && time.Since(r.Timestamp) > time.Minute {
					t.Errorf("record %s on a LogAppendTime topic: timestamp %s, want the broker's append time", r.Key, r.Timestamp)
				}
			}
		})
	}
}

// TestPipelineOldBacklog: a kafka -> kafka pipeline over a backlog with
// 2020 timestamps delivers every record exactly once (the regression wrote 49
// out from 8 in: each retry of the timed-out batch resent the records of
// other partitions that had been written).
func TestPipelineOldBacklog(t *testing.T) {
	b := testenv.Kafka(t)
	in, out := testenv.Topic(t, "in"), testenv.Topic(t, "out")
	createTopic(t, b.Seeds, in, 4, nil)
	createTopic(t, b.Seeds, out, 4, nil)
	const n = 2000
	fillAt(t, b.Client(t), in, 0, n, ts2020)
	src, err := kafka.NewSource(kafka.SourceConfig{Seeds: b.Seeds, Topics: []string{in}, Group: testenv.Topic(t, "g"), Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: b.Seeds, Topic: out, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), sink)
	p := pipeline.New("old", src, sink, pipeline.WithBatch(100, 1<<20, time.Millisecond), pipeline.WithWorkers(2))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	seen := tally(t, b.Seeds, out, n, 2*time.Second, 40*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	missing, dup := missingDup(seen, n)
	st := p.Status()
	if missing != 0 || dup != 0 || st.Out != n {
		t.Fatalf("%d in: %d missing, %d duplicates in the output; status %+v", n, missing, dup, st)
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(ln.Close)
	return ln.Addr().(*net.TCPAddr).Port
}

// restartable is a kfake broker on a fixed port and data dir that a test
// can stop and start again, as an operator restarts a broker.
type restartable struct {
	t    testing.TB
	port int
	dir  string
	opts []kfake.Opt
	mu   sync.Mutex
	c    *kfake.Cluster
}

func newRestartable(t testing.TB, opts ...kfake.Opt) *restartable {
	r := &restartable{t: t, port: freePort(t), dir: t.TempDir(), opts: opts}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) seeds() []string { return []string{"127.0.0.1:" + strconv.Itoa(r.port)} }

func (r *restartable) start() {
	r.t.Helper()
	opts := append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(r.port), kfake.DataDir(r.dir), kfake.DefaultNumPartitions(4),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, "127.0.0.1:"+strconv.Itoa(r.port))
		})}, r.opts...)
	var err error
	for i := 0; i < 50; i++ { // the port may linger a moment after a stop
		var c *kfake.Cluster
		if c, err = kfake.NewCluster(opts...); err == nil {
			r.mu.Lock()
			r.c = c
			r.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("restart kfake on port %d: %v", r.port, err)
}

func (r *restartable) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		r.c.Close()
		r.c = nil
	}
}

// TestOutageLongerThanClientTimeouts: the broker is down for 35 s (over
// every franz-go timeout the sink used, the 30 s delivery timeout among
// them) while three pipelines, one per error policy, write to it; then it
// comes back with its data. Every record arrives, none is dropped or
// dead-lettered, the pipelines are still running during the outage, and
// the idempotent producer writes no duplicate. The regression:
// records buffered during the outage failed with the last dial error and
// went to the error policy (drop dropped 487 of 3,000 here; stop failed
// the pipeline; dlq hung draining).
func TestOutageLongerThanClientTimeouts(t *testing.T) {
	if testing.Short() {
		t.Skip("a 35 s outage")
	}
	br := newRestartable(t)
	const n = 3000
	type run struct {
		name string
		p    *pipeline.Pipeline
		src  *seqSource
		done chan error
	}
	var runs []*run
	for _, policy := range []pipeline.Policy{pipeline.PolicyStop, pipeline.PolicyDrop, pipeline.PolicyDLQ} {
		name := []string{"stop", "drop", "dlq"}[policy]
		createTopic(t, br.seeds(), "out-"+name, 4, nil)
		sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: br.seeds(), Topic: "out-" + name, Partitions: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer testenv.Close(t, context.Background(), sink)
		dlq, err := kafka.NewSink(kafka.SinkConfig{Seeds: br.seeds(), Topic: "dlq-" + name, Partitions: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer testenv.Close(t, context.Background(), dlq)
		r := &run{name: name, src: newSeqSource(n, 100), done: make(chan error, 1)} // 100 records/s: 30 s of input
		r.p = pipeline.New(name, r.src, sink, pipeline.WithBatch(50, 1<<20, 5*time.Millisecond),
			pipeline.WithErrorPolicy(policy, dlq), pipeline.WithRetry(50*time.Millisecond, time.Second, 0), pipeline.WithStallTimeout(5*time.Second))
		go func() { r.done <- r.p.Run(context.Background()) }()
		runs = append(runs, r)
	}
	for _, r := range runs {
		r.src.waitSent(t, 300)
	}
	br.stop()
	time.Sleep(35 * time.Second)
	for _, r := range runs {
		s := r.p.Status()
		if s.State != pipeline.StateRunning {
			t.Errorf("policy %s: after 35 s of outage the pipeline is %s: %s", r.name, s.State, s.Error)
		}
		if s.Ready || !s.Stalled || !strings.Contains(s.Reason, "records in flight") || !strings.Contains(s.Reason, "connection refused") {
			t.Errorf("policy %s: during the outage: ready %v, stalled %v, reason %q", r.name, s.Ready, s.Stalled, s.Reason)
		}
	}
	t.Logf("during the outage: %s", runs[0].p.Status().Reason)
	br.start()
	for _, r := range runs {
		var runErr error
		select {
		case runErr = <-r.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("policy %s: pipeline did not finish 60 s after the broker came back: %+v", r.name, r.p.Status())
		}
		seen := tally(t, br.seeds(), "out-"+r.name, n, time.Second, 30*time.Second)
		missing, dup := missingDup(seen, n)
		st := r.p.Status()
		t.Logf("policy %s: in %d, out %d, missing %d, duplicates %d, dropped %d, dlq %d, ready %v", r.name, n, st.Out, missing, dup, st.Dropped, st.DLQ, st.Ready)
		if runErr != nil || missing != 0 || dup != 0 || st.Dropped != 0 || st.DLQ != 0 || st.Errors != 0 {
			t.Errorf("policy %s: run err %v; %d missing, %d duplicates; status %+v", r.name, runErr, missing, dup, st)
		}
	}
}

// seqSource emits records seq 0..n-1 at rate records/s with fresh
// timestamps, then ends (io.EOF): the input side of a pipeline whose
// sink's broker fails.
type seqSource struct {
	n, rate int
	mu      sync.Mutex
	next    int
	start   time.Time
}

func newSeqSource(n, rate int) *seqSource { return &seqSource{n: n, rate: rate} }

func (s *seqSource) sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

func (s *seqSource) waitSent(t testing.TB, k int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.sent() < k {
		if time.Now().After(deadline) {
			t.Fatalf("source sent %d of %d records in 30 s", s.sent(), k)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *seqSource) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	s.mu.Lock()
	if s.start.IsZero() {
		s.start = time.Now()
	}
	if s.next >= s.n {
		s.mu.Unlock()
		return nil, io.EOF
	}
	due := min(s.n, int(time.Since(s.start).Seconds()*float64(s.rate))+1)
	from := s.next
	s.mu.Unlock()
	if due <= from {
		select {
		case <-time.After(10 * time.Millisecond):
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	recs := seqRecords(from, due-from, 4, time.Now())
	msgs := make([]pipeline.Msg, len(recs))
	for i := range recs {
		msgs[i].Record = recs[i]
	}
	s.mu.Lock()
	s.next = due
	s.mu.Unlock()
	return msgs, nil
}

func (s *seqSource) Ack([]pipeline.Msg)           {}
func (s *seqSource) Commit(context.Context) error { return nil }
func (s *seqSource) Close(context.Context) error  { return nil }

// TestShutdownWhileBrokerDown: SIGTERM (Run's context cancelled) while
// the broker is down and the pipeline is full of records it cannot write:
// Run returns within the shutdown timeout plus the final commit's bound,
// the source and the sink close within their own bounds, and nothing
// unwritten is committed: after the broker is back a new run delivers
// every record.
func TestShutdownWhileBrokerDown(t *testing.T) {
	br := newRestartable(t)
	createTopic(t, br.seeds(), "in", 4, nil)
	createTopic(t, br.seeds(), "out", 4, nil)
	const n = 20000
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	fillAt(t, cl, "in", 0, n, time.Now())
	cl.Close()
	// A static member (as streamd's default instance_id = "auto"): the run
	// that could not leave the group during the outage is replaced at once
	// by the next, instead of after the session timeout.
	instances := t.TempDir()
	run := func(shutdown time.Duration, stopBroker bool) *pipeline.Pipeline {
		src, err := kafka.NewSource(kafka.SourceConfig{Seeds: br.seeds(), Topics: []string{"in"}, Group: "g", Partitions: 4, InstanceDir: instances})
		if err != nil {
			t.Fatal(err)
		}
		sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: br.seeds(), Topic: "out", Partitions: 4})
		if err != nil {
			t.Fatal(err)
		}
		p := pipeline.New("down", src, sink, pipeline.WithBatch(100, 1<<20, time.Millisecond), pipeline.WithMaxInFlight(5000),
			pipeline.WithShutdownTimeout(shutdown), pipeline.WithCommitInterval(100*time.Millisecond))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		if !stopBroker {
			tally(t, br.seeds(), "out", n, 0, time.Minute)
		} else {
			for deadline := time.Now().Add(30 * time.Second); p.Status().In < 2000; {
				if time.Now().After(deadline) {
					t.Fatalf("read only %d records", p.Status().In)
				}
				time.Sleep(5 * time.Millisecond)
			}
			br.stop()
			time.Sleep(2 * time.Second) // in flight piles up against the dead broker
		}
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(shutdown + 15*time.Second):
			t.Fatalf("Run did not return %s after the cancel (shutdown timeout %s); status %+v", shutdown+15*time.Second, shutdown, p.Status())
		}
		ran := time.Since(start)
		closeStart := time.Now()
		// With the broker down the sink says what it could not write
		// (records the pipeline did not commit: the next run writes them).
		if err := sink.Close(context.Background()); err != nil && !stopBroker {
			t.Errorf("close: %v", err)
		} else if err != nil {
			t.Logf("close with the broker down: %v", err)
		}
		t.Logf("broker down: %v; Run returned %s after the cancel, sink closed in %s; status %+v", stopBroker, ran.Round(time.Millisecond), time.Since(closeStart).Round(time.Millisecond), p.Status())
		if stopBroker && time.Since(closeStart) > 7*time.Second {
			t.Errorf("sink took %s to close", time.Since(closeStart))
		}
		return p
	}
	run(time.Second, true)
	br.start()
	run(30*time.Second, false)
	seen := tally(t, br.seeds(), "out", n, time.Second, 30*time.Second)
	if missing, dup := missingDup(seen, n); missing != 0 {
		t.Fatalf("%d of %d missing after the restart (%d duplicates)", missing, n, dup)
	} else {
		t.Logf("%d duplicates of %d after the SIGTERM during the outage", dup, n)
	}
}

// TestOversizeRecord: one record over a size limit among good ones: over
// the sink's max_record_bytes (1.5 MB against 1 MiB) or over the sink
// topic's max.message.bytes (200 KB against 100 KB, in a partition batch
// with good records). With policy dlq only that record is dead-lettered,
// without its value (the DLQ topic has the same limit), its error naming
// the limit; every other record is written. With policy stop the pipeline
// fails at once with an error naming the record and the limit, instead of
// hanging in its fetch.
func TestOversizeRecord(t *testing.T) {
	b := testenv.Kafka(t)
	for _, tc := range []struct {
		name     string
		size     int
		sinkConf map[string]string
		want     string
	}{
		{"over-max_record_bytes", 1500 * 1000, nil, "over the sink's max_record_bytes of 1048588"},
		{"over-topic-max.message.bytes", 200 * 1000, map[string]string{"max.message.bytes": "100000"}, "max.message.bytes"},
	} {
		for _, policy := range []pipeline.Policy{pipeline.PolicyDLQ, pipeline.PolicyStop} {
			t.Run(tc.name+"/"+policy.String(), func(t *testing.T) {
				in, out, dlqTopic := testenv.Topic(t, "in"), testenv.Topic(t, "out"), testenv.Topic(t, "dlq")
				createTopic(t, b.Seeds, in, 1, map[string]string{"max.message.bytes": "4000000"})
				createTopic(t, b.Seeds, out, 1, tc.sinkConf)
				createTopic(t, b.Seeds, dlqTopic, 1, tc.sinkConf)
				cl := b.Client(t, kgo.ProducerBatchMaxBytes(4<<20))
				fillAt(t, cl, in, 0, 10, time.Now())
				big := &kgo.Record{Topic: in, Key: []byte("k-10"), Value: make([]byte, tc.size), Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte("10")}}}
				if err := cl.ProduceSync(context.Background(), big).FirstErr(); err != nil {
					t.Fatal(err)
				}
				fillAt(t, cl, in, 11, 10, time.Now())
				src, err := kafka.NewSource(kafka.SourceConfig{Seeds: b.Seeds, Topics: []string{in}, Group: testenv.Topic(t, "g"), Partitions: 1})
				if err != nil {
					t.Fatal(err)
				}
				sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: b.Seeds, Topic: out, Partitions: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer testenv.Close(t, context.Background(), sink)
				dlq, err := kafka.NewSink(kafka.SinkConfig{Seeds: b.Seeds, Topic: dlqTopic, Partitions: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer testenv.Close(t, context.Background(), dlq)
				p := pipeline.New("big", src, sink, pipeline.WithBatch(100, 8<<20, 20*time.Millisecond), pipeline.WithErrorPolicy(policy, dlq))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- p.Run(ctx) }()
				if policy == pipeline.PolicyStop {
					select {
					case err := <-done:
						if err == nil || !strings.Contains(err.Error(), in+"/0@10") || !strings.Contains(err.Error(), tc.want) {
							t.Fatalf("err = %v, want it to name %s/0@10 and %q", err, in, tc.want)
						}
						t.Logf("stop: %v", err)
					case <-time.After(30 * time.Second):
						t.Fatalf("the failed pipeline did not return in 30 s: %+v", p.Status())
					}
					return
				}
				seen := tally(t, b.Seeds, out, 20, time.Second, 30*time.Second)
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if len(seen) != 20 || seen[10] != 0 {
					t.Fatalf("sink holds %d distinct records (want the 20 small ones): %v", len(seen), seen)
				}
				dl := b.Client(t, kgo.ConsumeTopics(dlqTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				var dead []*kgo.Record
				rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer rcancel()
				for len(dead) < 1 && rctx.Err() == nil {
					dl.PollFetches(rctx).EachRecord(func(r *kgo.Record) { dead = append(dead, r) })
				}
				if len(dead) != 1 {
					t.Fatalf("dlq holds %d records, want 1; status %+v", len(dead), p.Status())
				}
				h := map[string]string{}
				for _, x := range dead[0].Headers {
					h[x.Key] = string(x.Value)
				}
				t.Logf("dead letter: key %q, value %d bytes, headers %v", dead[0].Key, len(dead[0].Value), h)
				if h[pipeline.HeaderSourceOffset] != "10" || !strings.Contains(h[pipeline.HeaderError], tc.want) ||
					h[pipeline.HeaderTruncated] != "value" || h[pipeline.HeaderValueBytes] != strconv.Itoa(tc.size) || h["seq"] != "10" {
					t.Fatalf("dead letter headers %v", h)
				}
			})
		}
	}
}

// gatedSource emits records seq 0.. with fresh timestamps as far as the
// test has released them, and never ends.
type gatedSource struct {
	mu       sync.Mutex
	next     int
	released int
}

func (s *gatedSource) release(n int) {
	s.mu.Lock()
	s.released = n
	s.mu.Unlock()
}

func (s *gatedSource) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	s.mu.Lock()
	from, to := s.next, s.released
	s.next = to
	s.mu.Unlock()
	if from >= to {
		select {
		case <-time.After(5 * time.Millisecond):
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	recs := seqRecords(from, to-from, 4, time.Now())
	msgs := make([]pipeline.Msg, len(recs))
	for i := range recs {
		msgs[i].Record = recs[i]
	}
	return msgs, nil
}

func (s *gatedSource) Ack([]pipeline.Msg)           {}
func (s *gatedSource) Commit(context.Context) error { return nil }
func (s *gatedSource) Close(context.Context) error  { return nil }

// TestSinkTopicDeleted: the sink topic is deleted while a pipeline writes
// to it. The sink creates it again (as streamd does at start) and the
// records written after the deletion all arrive; a topic deleted and
// re-created by hand (with another partition count) is written to
// without a restart (franz-go refuses a re-created topic, UNKNOWN_TOPIC_ID,
// until it is purged from the client). The regression: retried
// forever, never re-created; UNKNOWN_TOPIC_ID until restart.
func TestSinkTopicDeleted(t *testing.T) {
	b := testenv.Kafka(t)
	for _, manual := range []bool{false, true} {
		t.Run(map[bool]string{false: "re-created-by-streamd", true: "re-created-by-hand"}[manual], func(t *testing.T) {
			out := testenv.Topic(t, "out")
			createTopic(t, b.Seeds, out, 4, nil)
			sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: b.Seeds, Topic: out, Partitions: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer testenv.Close(t, context.Background(), sink)
			src := &gatedSource{}
			p := pipeline.New("deleted", src, sink, pipeline.WithBatch(50, 1<<20, time.Millisecond), pipeline.WithRetry(50*time.Millisecond, time.Second, 0))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			src.release(500)
			if seen := tally(t, b.Seeds, out, 500, 0, 30*time.Second); len(seen) != 500 {
				t.Fatalf("before the deletion: %d of 500 written", len(seen))
			}
			adm := kadm.NewClient(b.Client(t))
			actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer acancel()
			if resp, err := adm.DeleteTopic(actx, out); err != nil || resp.Err != nil {
				t.Fatalf("delete %s: %v %v", out, err, resp.Err)
			}
			if manual {
				// Kafka deletes asynchronously: create once the name is free.
				for {
					resp, err := adm.CreateTopic(actx, 2, 1, nil, out)
					if err == nil && resp.Err == nil {
						break
					}
					if actx.Err() != nil {
						t.Fatalf("re-create %s: %v %v", out, err, resp.Err)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			start := time.Now()
			src.release(1500)
			seen := tally(t, b.Seeds, out, 1000, time.Second, 90*time.Second)
			missing := 0
			for i := 500; i < 1500; i++ {
				if seen[i] == 0 {
					missing++
				}
			}
			t.Logf("after the deletion: %d of 1000 arrived in %s; status %+v", 1000-missing, time.Since(start).Round(time.Millisecond), p.Status())
			if missing != 0 {
				t.Fatalf("%d of the 1000 records written after the deletion are missing", missing)
			}
			if s := p.Status(); s.State != pipeline.StateRunning || s.Errors != 0 {
				t.Fatalf("status %+v", s)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSinkBrokerLostItsState: the broker comes back empty (a new cluster
// on the same address: no topics, no producer IDs), as after a
// broker's disks were replaced or a long outage expired the producer's
// state. The idempotent producer resets its producer ID and epoch, the
// sink re-creates its topic, and everything written after the loss
// arrives, without a restart.
func TestSinkBrokerLostItsState(t *testing.T) {
	br := newRestartable(t)
	createTopic(t, br.seeds(), "out", 4, nil)
	sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: br.seeds(), Topic: "out", Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), sink)
	src := &gatedSource{}
	p := pipeline.New("lost", src, sink, pipeline.WithBatch(50, 1<<20, time.Millisecond), pipeline.WithRetry(50*time.Millisecond, time.Second, 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	src.release(500)
	if seen := tally(t, br.seeds(), "out", 500, 0, 30*time.Second); len(seen) != 500 {
		t.Fatalf("before: %d of 500 written", len(seen))
	}
	br.stop()
	br.dir = t.TempDir() // a broker that lost everything
	br.start()
	start := time.Now()
	src.release(1500)
	seen := tally(t, br.seeds(), "out", 1000, time.Second, 60*time.Second)
	missing, dup := 0, 0
	for i := 500; i < 1500; i++ {
		switch {
		case seen[i] == 0:
			missing++
		case seen[i] > 1:
			dup += seen[i] - 1
		}
	}
	t.Logf("after the loss: %d of 1000 arrived in %s, %d duplicates; status %+v", 1000-missing, time.Since(start).Round(time.Millisecond), dup, p.Status())
	if missing != 0 || p.Status().Errors != 0 {
		t.Fatalf("%d of the 1000 records written after the loss are missing; status %+v", missing, p.Status())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// proxiedKfake is a kfake broker that its clients reach only through a
// fault proxy (it advertises the proxy's address).
func proxiedKfake(t testing.TB) (*kfake.Cluster, *faultproxy.Proxy) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px, err := faultproxy.Listen("127.0.0.1:0", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	testenv.Cleanup(t, px.Close)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(4),
		kfake.ListenFn(func(string, string) (net.Listener, error) { return faultproxy.Advertise(ln, px.Addr()), nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, px
}

// TestReadinessDuringBrokerFault: while the broker refuses connections
// (down) or swallows all traffic (frozen: SIGSTOP, a partition), a kafka
// -> kafka pipeline is not ready, says why, and reports every partition's
// lag as unknown, never 0 and never missing; after the fault it is ready
// again and has delivered everything.
func TestReadinessDuringBrokerFault(t *testing.T) {
	for _, mode := range []faultproxy.Mode{faultproxy.Refuse, faultproxy.Blackhole} {
		t.Run(mode.String(), func(t *testing.T) {
			_, px := proxiedKfake(t)
			seeds := []string{px.Addr()}
			createTopic(t, seeds, "in", 4, nil)
			createTopic(t, seeds, "out", 4, nil)
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
			if err != nil {
				t.Fatal(err)
			}
			fillAt(t, cl, "in", 0, 1000, time.Now())
			src, err := kafka.NewSource(kafka.SourceConfig{Seeds: seeds, Topics: []string{"in"}, Group: "g", LagInterval: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			sink, err := kafka.NewSink(kafka.SinkConfig{Seeds: seeds, Topic: "out"})
			if err != nil {
				t.Fatal(err)
			}
			defer testenv.Close(t, context.Background(), sink)
			p := pipeline.New("ready", src, sink, pipeline.WithStallTimeout(2*time.Second))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			waitFor(t, 30*time.Second, "caught up and ready", func() bool {
				s := p.Status()
				return s.Ready && s.Out == 1000 && len(s.Lag) == 4 && s.Lag["in/0"] == 0
			})
			t.Logf("before the fault: %+v", p.Status())
			setProxy(t, px, mode)
			start := time.Now()
			fillLater := make(chan struct{})
			go func() { // more input meanwhile, through a client that bypasses nothing: it waits too
				defer close(fillLater)
				fillAt(t, cl, "in", 1000, 1000, time.Now())
			}()
			var s pipeline.Status
			waitFor(t, 60*time.Second, "not ready, lag unknown", func() bool {
				s = p.Status()
				unknown := 0
				for _, v := range s.Lag {
					if v == pipeline.LagUnknown {
						unknown++
					}
				}
				return !s.Ready && s.Stalled && unknown == 4 && len(s.Lag) == 4
			})
			t.Logf("%s: not ready after %s: %s; lag %v", mode, time.Since(start).Round(100*time.Millisecond), s.Reason, s.Lag)
			if s.Reason == "" {
				t.Fatal("no reason given")
			}
			setProxy(t, px, faultproxy.Pass)
			start = time.Now()
			<-fillLater
			// Everything written (read from the output, not counted: a
			// session lost in the fault replays what was not committed).
			seen := tally(t, seeds, "out", 2000, 0, 90*time.Second)
			waitFor(t, 90*time.Second, "ready again", func() bool { return p.Status().Ready })
			t.Logf("%s: ready again and all written %s after the fault healed", mode, time.Since(start).Round(100*time.Millisecond))
			cl.Close()
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// Duplicates: at most the records acknowledged but not yet
			// committed (commit_interval 1s) when the session was lost,
			// here at most the first 1000.
			if missing, dup := missingDup(seen, 2000); missing != 0 || dup > 1000 {
				t.Fatalf("%d of 2000 missing, %d duplicates; status %+v", missing, dup, p.Status())
			} else {
				t.Logf("%s: 0 missing, %d duplicates (records acknowledged but not committed when the session was lost)", mode, dup)
			}
		})
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setProxy puts px in mode m; a proxy that cannot fails the test (the
// fault was not injected, or not healed).
func setProxy(t testing.TB, px *faultproxy.Proxy, m faultproxy.Mode) {
	t.Helper()
	if err := px.Set(m); err != nil {
		t.Fatalf("proxy: %v", err)
	}
}
