package fluid

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/x/kgox"
)

// bridgeProc is a bridge running in a child process (this test binary).
type bridgeProc struct {
	cmd  *exec.Cmd
	addr string
}

func startBridgeProc(t *testing.T, env []string, dir string, n int) *bridgeProc {
	t.Helper()
	addrFile := filepath.Join(dir, "addr-"+strconv.Itoa(n))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), "FLUID_TEST_BRIDGE=1", "FLUID_TEST_ADDR_FILE="+addrFile)
	logf, err := os.Create(filepath.Join(dir, "bridge-"+strconv.Itoa(n)+".log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // it may be dead already
		_ = cmd.Wait()
		_ = logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(addrFile)
		if err == nil {
			return &bridgeProc{cmd: cmd, addr: string(b)}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("bridge process did not start: %s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httpGetJSON(t *testing.T, u string, out any) {
	t.Helper()
	resp, err := http.Get(u)
	must(t, err)
	defer testenv.Ignore(resp.Body.Close)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", u, resp.Status, b)
	}
	must(t, json.NewDecoder(resp.Body).Decode(out))
}

// downgradeTopicRecords reads every record of topic (up to the current end).
func readAll(t *testing.T, cl *kgo.Client, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	must(t, err)
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	offs := map[int32]kgo.Offset{}
	for p := range want {
		offs[p] = kgo.NewOffset().AtStart()
	}
	if len(offs) == 0 {
		return nil
	}
	rc, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	must(t, err)
	defer rc.Close()
	var out []*kgo.Record
	got := map[int32]int64{}
	for {
		done := true
		for p, e := range want {
			if got[p] < e {
				done = false
			}
		}
		if done {
			return out
		}
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (got %v of %v)", topic, ctx.Err(), got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			got[r.Partition] = r.Offset + 1
		})
	}
}

// TestBridgeSIGKILL: the bridge process is killed with
// SIGKILL in the middle of republishing and started again; the downgrade
// topic then has every record, and any duplicate is recognisable by its
// source-offset header.
func TestBridgeSIGKILL(t *testing.T) {
	broker := testenv.Kafka(t)
	dir := t.TempDir()
	topic := "orders"
	if broker.Real {
		topic = testenv.Topic(t, "orders")
	}
	const n = 3000
	broker.CreateTopic(t, topic, 2)
	// Small producer batches, so the bridge (fetching 4 KiB at a time) needs
	// many rounds and can be killed in the middle.
	prod := broker.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(2048))
	var rs []*kgo.Record
	for id := range n {
		rs = append(rs, &kgo.Record{Key: []byte("order-" + strconv.Itoa(id)), Value: order(4, id),
			Headers: []kgo.RecordHeader{{Key: HeaderSchemaVersion, Value: []byte("4")}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must(t, prod.ProduceSync(ctx, rs...).FirstErr())

	env := []string{
		"FLUID_TEST_METADATA=" + writeMetadata(t, 4),
		"FLUID_TEST_TOPIC=" + topic,
		"FLUID_TEST_BROKERS=" + strings.Join(broker.Seeds, ","),
		"FLUID_TEST_STATE=" + testenv.Topic(t, "fluid-state"),
		"FLUID_TEST_LEADER=" + testenv.Topic(t, "fluid-leader"),
		"FLUID_TEST_DELAY=20ms",
	}
	b1 := startBridgeProc(t, env, dir, 1)
	base := "http://" + b1.addr
	var dt struct{ Topic string }
	httpGetJSON(t, base+"/fluid/downgrade-topic?"+url.Values{"topic": {topic}, "group": {"g"}, "compatible-schema-version": {"3"}}.Encode(), &dt)
	var cp struct{ Compatible bool }
	httpGetJSON(t, base+"/fluid/compatible?"+url.Values{"topic": {topic}, "observed-schema-version": {"4"}, "compatible-schema-version": {"3"}}.Encode(), &cp)
	if cp.Compatible {
		t.Fatal("v4 compatible with v3")
	}
	// Kill it once part of the topic is republished.
	adm := kadm.NewClient(prod)
	written := func() int64 {
		ends, err := adm.ListEndOffsets(ctx, dt.Topic)
		must(t, err)
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += max(o.Offset, 0) })
		return sum
	}
	deadline := time.Now().Add(30 * time.Second)
	for written() < n/5 {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "bridge-1.log"))
			t.Fatalf("bridge did not republish: %s", log)
		}
		time.Sleep(5 * time.Millisecond)
	}
	must(t, b1.cmd.Process.Signal(syscall.SIGKILL))
	_ = b1.cmd.Wait() // "killed"
	atKill := written()
	if atKill >= n {
		t.Fatalf("the bridge had finished (%d records) before it was killed; slow it down", atKill)
	}
	t.Logf("killed with %d of %d records republished", atKill, n)

	startBridgeProc(t, env, dir, 2)
	deadline = time.Now().Add(60 * time.Second)
	for written() < n {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "bridge-2.log"))
			t.Fatalf("restarted bridge stopped at %d of %d: %s", written(), n, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // anything late would show up now

	recs := readAll(t, prod, dt.Topic)
	src := readAll(t, prod, topic)
	mainOffsets := map[int32]map[int64]bool{}
	for _, r := range src {
		if mainOffsets[r.Partition] == nil {
			mainOffsets[r.Partition] = map[int64]bool{}
		}
		mainOffsets[r.Partition][r.Offset] = true
	}
	got := map[int32]map[int64]bool{}
	maxSeen := map[int32]int64{}
	dups := 0
	for _, r := range recs {
		rec := kgox.Record(r)
		sp, so, err := sourcePosition(&rec)
		must(t, err)
		if sp != r.Partition {
			t.Fatalf("record from partition %d on partition %d", sp, r.Partition)
		}
		if m, ok := maxSeen[sp]; ok && so <= m {
			// A duplicate: detectable because its source offset is not
			// past the highest one already seen on the partition.
			if !got[sp][so] {
				t.Fatalf("partition %d: source offset %d after %d but never seen before (out of order)", sp, so, m)
			}
			dups++
			continue
		}
		maxSeen[sp] = so
		if got[sp] == nil {
			got[sp] = map[int64]bool{}
		}
		got[sp][so] = true
	}
	for p, offs := range mainOffsets {
		for o := range offs {
			if !got[p][o] {
				t.Errorf("main record %d/%d missing from the downgrade topic", p, o)
			}
		}
	}
	t.Logf("downgrade topic: %d records for %d sources, %d duplicates", len(recs), len(src), dups)
	// Resuming from the downgrade topic's tail: at most what was in flight
	// at the kill may be written twice, never the whole prefix again.
	if dups > 200 {
		t.Errorf("%d duplicates after a restart at %d records: the bridge re-published what it had written", dups, atKill)
	}
}

// TestBridgeSIGKILLMidBackfill: a late group needs records the downgrade
// topic never held, so the bridge republishes the partitions again from
// the start (a new segment); the bridge is killed with SIGKILL in the
// middle of that and started again. The late group then receives every
// record exactly once, in order, as v3: the restarted bridge resumes the
// new segment (named in every record) instead of the old one, and what
// was in flight at the kill, if written twice, is dropped by source
// position.
func TestBridgeSIGKILLMidBackfill(t *testing.T) {
	broker := testenv.Kafka(t)
	dir := t.TempDir()
	topic := "orders"
	if broker.Real {
		topic = testenv.Topic(t, "orders")
	}
	const n = 3000
	broker.CreateTopic(t, topic, 2)
	prod := broker.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(2048))
	var rs []*kgo.Record
	for id := range n {
		rs = append(rs, &kgo.Record{Key: []byte("order-" + strconv.Itoa(id)), Value: order(4, id),
			Headers: []kgo.RecordHeader{{Key: HeaderSchemaVersion, Value: []byte("4")}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	must(t, prod.ProduceSync(ctx, rs...).FirstErr())
	metaDir := writeMetadata(t, 4)
	state, leader := testenv.Topic(t, "fluid-state"), testenv.Topic(t, "fluid-leader")
	env := []string{
		"FLUID_TEST_METADATA=" + metaDir,
		"FLUID_TEST_TOPIC=" + topic,
		"FLUID_TEST_BROKERS=" + strings.Join(broker.Seeds, ","),
		"FLUID_TEST_STATE=" + state,
		"FLUID_TEST_LEADER=" + leader,
		"FLUID_TEST_DELAY=20ms",
	}
	b1 := startBridgeProc(t, env, dir, 1)
	base := "http://" + b1.addr
	// Group g (v3) starts at the end of the topic (its offsets were reset
	// to latest): republishing begins there, the downgrade topic holds
	// nothing of the 3,000 records.
	gName, late := testenv.Topic(t, "g"), testenv.Topic(t, "late")
	var dt struct{ Topic string }
	httpGetJSON(t, base+"/fluid/downgrade-topic?"+url.Values{"topic": {topic}, "group": {gName}, "compatible-schema-version": {"3"}}.Encode(), &dt)
	adm := kadm.NewClient(prod)
	ends, err := adm.ListEndOffsets(ctx, topic)
	must(t, err)
	var offs kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) { offs.AddOffset(topic, o.Partition, o.Offset, -1) })
	cresp, err := adm.CommitOffsets(ctx, gName, offs)
	must(t, err)
	must(t, cresp.Error())
	var cp struct{ Compatible bool }
	httpGetJSON(t, base+"/fluid/compatible?"+url.Values{"topic": {topic}, "observed-schema-version": {"4"}, "compatible-schema-version": {"3"}}.Encode(), &cp)
	// The late group asks for position 0 of each partition: new segments.
	httpGetJSON(t, base+"/fluid/downgrade-topic?"+url.Values{"topic": {topic}, "group": {late}, "compatible-schema-version": {"3"}}.Encode(), &dt)
	for p := range 2 {
		var ans DowngradeOffset
		httpGetJSON(t, base+"/fluid/downgrade-offset?"+url.Values{"topic": {topic}, "group": {late}, "compatible-schema-version": {"3"},
			"partition": {strconv.Itoa(p)}, "source-offset": {"0"}}.Encode(), &ans)
		if ans.Segment == 0 || ans.From != 0 {
			t.Fatalf("partition %d: %+v, want a new segment from 0", p, ans)
		}
	}
	written := func() int64 {
		ends, err := adm.ListEndOffsets(ctx, dt.Topic)
		must(t, err)
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += max(o.Offset, 0) })
		return sum
	}
	deadline := time.Now().Add(60 * time.Second)
	for written() < n/5 {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "bridge-1.log"))
			t.Fatalf("bridge did not republish: %s", log)
		}
		time.Sleep(5 * time.Millisecond)
	}
	must(t, b1.cmd.Process.Signal(syscall.SIGKILL))
	_ = b1.cmd.Wait() // "killed"
	atKill := written()
	if atKill >= n {
		t.Fatalf("the bridge had finished (%d records) before it was killed; slow it down", atKill)
	}
	t.Logf("killed with %d of %d records republished again", atKill, n)

	b2 := startBridgeProc(t, env, dir, 2)
	meta, err := LoadMetadata(metaDir)
	must(t, err)
	meta = meta.renameTopic("orders", topic)
	c, err := NewConsumer(ctx, ConsumerConfig{BridgeURL: "http://" + b2.addr, Topic: topic, Group: late, CompatibleVersion: 3,
		KafkaOptions: []kgo.Opt{kgo.SeedBrokers(broker.Seeds...)}, Logger: quietLogger()})
	must(t, err)
	defer testenv.Close(t, context.Background(), c)
	s := newSeen(t, meta, topic, 3)
	s.collect(c, n)
	s.exactlyAll(0, n)
	if !c.Downgraded() {
		t.Fatal("the late consumer never read the downgrade topic")
	}
	// The restarted bridge resumed the new segment: at most what was in
	// flight at the kill is written twice, not the segment again from its
	// start (nor did the consumer have to ask for yet another one).
	total := written()
	t.Logf("downgrade topic: %d records written for %d sources", total, n)
	if total-n > 200 {
		t.Errorf("%d records written for %d sources after a kill at %d: the restarted bridge did not resume the segment", total, n, atKill)
	}
}

// TestConsumerSIGKILL backs what docs/fluid.md says a SIGKILL costs a
// consumer: the replacement replays what was
// processed but not committed, loses nothing, and takes the partitions
// back at once with instance_id (static membership), but only after the
// session timeout without it.
func TestConsumerSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		name     string
		instance bool
		session  time.Duration
	}{
		{"no instance_id", false, 6 * time.Second},
		{"instance_id", true, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 2, 2)
			h.produce(1, seq(0, 100)...)
			h.produce(2, seq(100, 300)...)
			instance := ""
			if tc.instance {
				instance = testenv.Topic(t, "instance")
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "FLUID_TEST_CONSUMER=1", "FLUID_TEST_BRIDGE_URL="+h.srv.URL,
				"FLUID_TEST_TOPIC="+h.topic, "FLUID_TEST_GROUP="+h.g("g"), "FLUID_TEST_BROKERS="+strings.Join(h.broker.Seeds, ","),
				"FLUID_TEST_COMMIT_UPTO=100", "FLUID_TEST_SESSION="+tc.session.String(), "FLUID_TEST_INSTANCE="+instance)
			out, err := cmd.StdoutPipe()
			must(t, err)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			must(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) // it may be dead already
			lines := make(chan string, 1000)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var received, committed []int
			deadline := time.After(60 * time.Second)
			for len(received) < 150 {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("consumer process ended: %s", stderr.String())
					}
					if l == "C" {
						committed = append([]int(nil), received...)
						continue
					}
					id, err := strconv.Atoi(strings.TrimPrefix(l, "R "))
					must(t, err)
					received = append(received, id)
				case <-deadline:
					t.Fatalf("consumer process got %d records: %s", len(received), stderr.String())
				}
			}
			must(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait() // "killed"
			killed := time.Now()
			for l := range lines { // what it printed before dying
				if l != "C" {
					id, _ := strconv.Atoi(strings.TrimPrefix(l, "R "))
					received = append(received, id)
				} else {
					committed = append([]int(nil), received...)
				}
			}
			uncommitted := len(received) - len(committed)
			if uncommitted == 0 {
				t.Fatal("the killed consumer had committed everything; nothing to replay")
			}

			kopts := []kgo.Opt{kgo.SeedBrokers(h.broker.Seeds...), kgo.SessionTimeout(tc.session)}
			if tc.instance {
				kopts = append(kopts, kgo.InstanceID(instance))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := NewConsumer(ctx, ConsumerConfig{BridgeURL: h.srv.URL, Topic: h.topic, Group: h.g("g"), CompatibleVersion: 1,
				KafkaOptions: kopts, Logger: quietLogger()})
			must(t, err)
			defer testenv.Close(t, context.Background(), c)
			s := h.seen(1)
			var first time.Duration
			for len(s.records) == 0 {
				if time.Since(killed) > 60*time.Second {
					t.Fatal("the replacement received nothing")
				}
				pctx, pcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				rs, err := c.Poll(pctx)
				pcancel()
				must(t, err)
				for _, r := range rs {
					s.add(r)
				}
				c.Ack(rs)
			}
			first = time.Since(killed)
			s.collect(c, 300-len(committed))
			// Nothing lost, nothing committed delivered again, and what
			// was not committed is replayed.
			for _, id := range committed {
				if s.ids[id] != 0 {
					t.Errorf("id %d was committed by the killed consumer and delivered again", id)
				}
			}
			for _, id := range received[len(committed):] {
				if s.ids[id] != 1 {
					t.Errorf("id %d was received but not committed by the killed consumer; replayed %d times, want once", id, s.ids[id])
				}
			}
			for id := range 300 {
				if s.ids[id] == 0 && !slices.Contains(committed, id) {
					t.Errorf("id %d lost", id)
				}
			}
			t.Logf("replayed %d records not committed; the replacement's first record came %v after the kill (session timeout %v)",
				uncommitted, first.Round(10*time.Millisecond), tc.session)
			// The dead member holds its partitions until the session
			// timeout (the last heartbeat may be up to a heartbeat interval,
			// 3 s, before the kill); a static member's replacement takes
			// them at once.
			if !tc.instance && first < tc.session-3*time.Second-time.Second {
				t.Errorf("without instance_id the replacement started %v after the kill, before the %v session timeout", first, tc.session)
			}
			if tc.instance && first > tc.session/2 {
				t.Errorf("with instance_id the replacement started only %v after the kill (session timeout %v)", first, tc.session)
			}
		})
	}
}
