package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/cli/opscli"
	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// fixedPoison is poison.wat with its rejection of "reje..." values gone
// (it compares with "~~~~" instead) and version 1.0.1: the fix.
var fixedPoison = []string{"(i32.const 0x656a6572)", "(i32.const 0x7e7e7e7e)", `\"version\":\"1.0.0\"`, `\"version\":\"1.0.1\"`}

// replaySetup runs pipeline "orders": topic in -> the poison Wasm stage
// (hot reloaded) -> topic out, dead letters to topic dlq.
type replaySetup struct {
	b            *testenv.Broker
	d            *daemon
	in, out, dlq string
	dir, plugin  string
	cl           *kgo.Client
}

func newReplaySetup(t *testing.T, partitions int32) *replaySetup {
	t.Helper()
	s := &replaySetup{b: testenv.Kafka(t), dir: t.TempDir()}
	s.in, s.out, s.dlq = testenv.Topic(t, "in"), testenv.Topic(t, "out"), testenv.Topic(t, "dlq")
	for _, tp := range []string{s.in, s.out, s.dlq} {
		s.b.CreateTopic(t, tp, partitions)
	}
	s.plugin = wat(t, "poison", s.dir, "validate.wasm")
	s.d = startDaemon(t, fmt.Sprintf(`
[kafka]
brokers = [%q]
[plugins]
watch = "200ms"
[console]
tap_max_rate = 100
[[pipeline]]
name = "orders"
max_in_flight = 20000
[pipeline.source]
type = "kafka"
topics = [%q]
group = "orders"
[[pipeline.transform]]
name = "validate"
type = "wasm"
path = %q
[pipeline.sink]
type = "kafka"
topic = %q
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
`, strings.Join(s.b.Seeds, `", "`), s.in, s.plugin, s.out, s.dlq))
	s.cl = s.b.Client(t)
	return s
}

func (s *replaySetup) status(t *testing.T) (out, dlqN, errs int64) {
	t.Helper()
	for _, p := range s.d.App.Pipelines() {
		if p.Name() == "orders" {
			st := p.Status()
			return st.Out, st.DLQ, st.Errors
		}
	}
	t.Fatal("no pipeline orders")
	return
}

func (s *replaySetup) waitCounts(t *testing.T, d time.Duration, out, dlqN int64) {
	t.Helper()
	waitFor(t, d, fmt.Sprintf("orders to write %d and dead-letter %d", out, dlqN), func() (bool, string) {
		o, q, _ := s.status(t)
		return o == out && q == dlqN, fmt.Sprintf("written %d, dead letters %d", o, q)
	})
}

// fix writes the fixed plugin over the running one and waits for the hot
// reload.
func (s *replaySetup) fix(t *testing.T) {
	t.Helper()
	wat(t, "poison", s.dir, "validate.wasm", fixedPoison...)
	waitFor(t, 60*time.Second, "the fixed plugin (1.0.1) reloaded", func() (bool, string) {
		var d struct {
			StageParts []struct {
				Version string
				Reloads int64
			} `json:"stage_parts"`
		}
		res, err := http.Get(s.d.Base + "/ui/api/pipelines/orders")
		if err != nil {
			return false, err.Error()
		}
		defer testenv.Ignore(res.Body.Close)
		if err := json.NewDecoder(res.Body).Decode(&d); err != nil {
			return false, err.Error()
		}
		return len(d.StageParts) == 1 && d.StageParts[0].Version == "1.0.1" && d.StageParts[0].Reloads == 1, fmt.Sprintf("%+v", d.StageParts)
	})
}

// dlqSnapshot is every dead letter: partition@offset -> key, value and
// headers, and the topic's end offsets.
func (s *replaySetup) dlqSnapshot(t *testing.T) (map[string]string, []dlq.Range) {
	t.Helper()
	r := dlq.NewReader(s.dlq, dlq.WithClientOpts(kgo.SeedBrokers(s.b.Seeds...)))
	ctx := context.Background()
	ranges, err := r.Ranges(ctx, dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	err = r.Scan(ctx, ranges, dlq.Filter{}, func(e *dlq.Entry) error {
		var b strings.Builder
		fmt.Fprintf(&b, "%s|%s|", e.Record.Key, e.Record.Value)
		for _, h := range e.Record.Headers {
			fmt.Fprintf(&b, "%s=%s;", h.Key, h.Value)
		}
		out[fmt.Sprintf("%d@%d", e.Partition, e.Offset)] = b.String()
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out, ranges
}

// readOut consumes n records of topic: key -> value, and the keys that
// carry a replay header.
func readOut(t *testing.T, b *testenv.Broker, topic string, n int) (map[string]string, map[string]string) {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	vals, replayed := map[string]string{}, map[string]string{}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", got, n, topic)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			vals[string(r.Key)] = string(r.Value)
			for _, h := range r.Headers {
				if h.Key == dlq.HeaderReplayOf {
					replayed[string(r.Key)] = string(h.Value)
				}
			}
		})
	}
	return vals, replayed
}

// TestDLQReplayAfterFix: 1,000 records among
// 100,000 are rejected by the Wasm stage and go to the dead-letter topic;
// the plugin is fixed (hot reload); `streamd dlq replay --to pipeline`
// sends the 1,000 through the pipeline again and every one arrives in the
// output; the dead-letter topic is unchanged.
func TestDLQReplayAfterFix(t *testing.T) {
	const n, every = 100000, 100
	s := newReplaySetup(t, 4)
	vals := make([]string, n)
	for i := range vals {
		if i%every == 42 {
			vals[i] = fmt.Sprintf("reject order %d: unknown currency", i)
		} else {
			vals[i] = fmt.Sprintf(`{"order":%d,"amount":%d}`, i, i%977)
		}
	}
	for i := 0; i < n; i += 10000 {
		produceFrom(t, s.cl, s.in, i, vals[i:i+10000])
	}
	s.waitCounts(t, 180*time.Second, n-n/every, n/every)
	before, beforeRanges := s.dlqSnapshot(t)
	if len(before) != n/every {
		t.Fatalf("%d dead letters, want %d", len(before), n/every)
	}

	s.fix(t)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	code := opscli.DLQ(ctx, []string{"replay", "-c", s.d.Cfg.File, "orders", "--to", "pipeline"}, &stdout, &stderr)
	t.Logf("streamd dlq replay --to pipeline: exit %d\n%s%s", code, stdout.String(), stderr.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stdout.String(), fmt.Sprintf("%d dead letters selected of %d read; %d replayed through pipeline orders", n/every, n/every, n/every)) ||
		!strings.Contains("\n"+stdout.String(), "\n0 of them rejected again") {
		t.Fatalf("replay output:\n%s", stdout.String())
	}

	// All 100,000 are in the output, each with its own value; the 1,000
	// once, replayed, with the dead letter they came from.
	got, replayed := readOut(t, s.b, s.out, n)
	for i, v := range vals {
		k := fmt.Sprintf("k%d", i)
		if got[k] != v {
			t.Fatalf("record %s: %q in the output, want %q", k, got[k], v)
		}
		_, re := replayed[k]
		if re != (i%every == 42) {
			t.Fatalf("record %s (%q): replayed %v", k, v, re)
		}
	}
	if len(got) != n || len(replayed) != n/every {
		t.Fatalf("%d keys in the output (%d replayed), want %d (%d)", len(got), len(replayed), n, n/every)
	}
	// The dead-letter topic is unchanged: same records at the same offsets,
	// nothing added, nothing removed.
	after, afterRanges := s.dlqSnapshot(t)
	if len(after) != len(before) || fmt.Sprint(afterRanges) != fmt.Sprint(beforeRanges) {
		t.Fatalf("DLQ changed: %d -> %d records, ranges %v -> %v", len(before), len(after), beforeRanges, afterRanges)
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("dead letter %s changed", k)
		}
	}
	if _, q, errs := s.status(t); q != n/every || errs != n/every {
		t.Fatalf("after the replay: %d dead letters, %d errors; want %d each", q, errs, n/every)
	}
}

// TestTapCommand: `streamd tap PIPELINE STAGE --count N` against the
// daemon prints N lines, each a record into the Wasm stage and what came
// out of it; a rejected record says REJECTED.
func TestTapCommand(t *testing.T) {
	s := newReplaySetup(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // a steady flow: 1 in 5 rejected
		for i := 0; ctx.Err() == nil; i += 50 {
			vals := make([]string, 50)
			for j := range vals {
				if j%5 == 0 {
					vals[j] = fmt.Sprintf("reject %d", i+j)
				} else {
					vals[j] = fmt.Sprintf(`{"n":%d}`, i+j)
				}
			}
			krs := make([]*kgo.Record, len(vals))
			for j, v := range vals {
				krs[j] = &kgo.Record{Topic: s.in, Key: []byte(fmt.Sprint(i + j)), Value: []byte(v)}
			}
			s.cl.ProduceSync(ctx, krs...)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var stdout, stderr bytes.Buffer
	tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
	defer tcancel()
	code := opscli.Tap(tctx, []string{"-c", s.d.Cfg.File, "orders", "validate", "--count", "40", "--rate", "50", "--bytes", "6"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 40 {
		t.Fatalf("%d lines, want 40:\n%s", len(lines), stdout.String())
	}
	var kept, rejected int
	for _, l := range lines {
		// validate IN/P@O key=K: {"n":1…(9 bytes)  ->  {"n":1…(9 bytes)
		if !strings.HasPrefix(l, "validate "+s.in+"/0@") || !strings.Contains(l, " key=") {
			t.Fatalf("line %q", l)
		}
		switch {
		case strings.HasSuffix(l, "->  REJECTED: rejected by poison.wat"):
			rejected++
		case strings.Count(l, `{"n":`) == 2 && strings.Count(l, "bytes)") == 2:
			kept++
			in, out, _ := strings.Cut(l[strings.Index(l, ": ")+2:], "  ->  ")
			if in != out {
				t.Fatalf("in %q, out %q", in, out)
			}
		default:
			t.Fatalf("line %q", l)
		}
	}
	if kept == 0 || rejected == 0 {
		t.Fatalf("%d kept, %d rejected", kept, rejected)
	}
	if !strings.Contains(stderr.String(), "tap open on orders stage validate: at most 50 records/s, values cut at 6 bytes") {
		t.Fatalf("stderr: %s", stderr.String())
	}
	// A stage that does not exist.
	stdout.Reset()
	stderr.Reset()
	if code := opscli.Tap(tctx, []string{"-c", s.d.Cfg.File, "orders", "nope"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), `has no stage "nope" (stages: [validate])`) {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}
