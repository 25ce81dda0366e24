package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/load"
)

// runDaemon runs body (with [kafka] brokers and [admin] added) in process
// until the test ends; it returns the admin address.
func runDaemon(t *testing.T, b *testenv.Broker, body string) string {
	t.Helper()
	return runDaemonFailing(t, b, body, "")
}

// runDaemonFailing is runDaemon for a daemon some of whose pipelines are
// to fail: Run's error at the end must contain wantErr (or be nil when
// wantErr is empty).
func runDaemonFailing(t *testing.T, b *testenv.Broker, body, wantErr string) string {
	t.Helper()
	return runDaemonWith(t, b, body, wantErr, app.Build)
}

// runDaemonLoading is runDaemonFailing as `streamd run` starts a daemon:
// app.New, every pipeline's plugins loaded as Run launches it, so that
// one that fails to load fails only its own pipeline.
func runDaemonLoading(t *testing.T, b *testenv.Broker, body, wantErr string) string {
	t.Helper()
	return runDaemonWith(t, b, body, wantErr, app.New)
}

func runDaemonWith(t *testing.T, b *testenv.Broker, body, wantErr string,
	build func(context.Context, *config.Config, *slog.Logger, plugins.OpenFunc, io.Writer) (*app.App, error)) string {
	t.Helper()
	dir := t.TempDir()
	addr := freePort(t)
	src := fmt.Sprintf("data_dir = %q\n[admin]\nlisten = %q\n[kafka]\nbrokers = [%q]\n", filepath.Join(dir, "data"), addr, b.Seeds[0]) + body
	cfg, err := config.Parse(filepath.Join(dir, "streamd.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	logs := testenv.LogFile(t, "streamd")
	testenv.TailOnFailure(t, logs.Name())
	a, err := build(context.Background(), cfg, slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, nil)), load.Open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; (err != nil || wantErr != "") && (err == nil || wantErr == "" || !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("Run: %v (want an error with %q)", err, wantErr)
		}
		testenv.Close(t, context.Background(), a)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			_ = resp.Body.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatal("the admin server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// consumeAll reads topic from the start until want records came or wait
// passed; it returns the values by key.
func consumeAll(t *testing.T, b *testenv.Broker, topic string, want int, wait time.Duration) map[string]string {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	got := map[string]string{}
	for len(got) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Key)] = string(r.Value) })
	}
	return got
}

func produceN(t *testing.T, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%s-%d", prefix, i), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestTopicsRegex: a source with topics_regex reads every topic that
// matches, and no other.
func TestTopicsRegex(t *testing.T) {
	b := testenv.Kafka(t)
	base := testenv.Topic(t, "rx")
	a, bb, other, out := base+"-orders-a", base+"-orders-b", base+"-payments", base+"-out"
	for _, tp := range []string{a, bb, other} {
		b.CreateTopic(t, tp, 2)
	}
	cl := b.Client(t)
	produceN(t, cl, a, "a", 50)
	produceN(t, cl, bb, "b", 50)
	produceN(t, cl, other, "p", 50)
	runDaemon(t, b, fmt.Sprintf(`[[pipeline]]
name = "rx"
[pipeline.source]
type = "kafka"
topics_regex = %q
group = %q
[pipeline.sink]
type = "kafka"
topic = %q
`, "^"+base+"-orders-.*$", testenv.Topic(t, "g"), out))
	consumeAll(t, b, out, 100, time.Minute)
	got := consumeAll(t, b, out, 101, 3*time.Second) // anything else would have come by now
	for k := range got {
		if strings.HasPrefix(k, "p-") {
			t.Fatalf("read %s of a topic the regex does not match", k)
		}
	}
	if len(got) != 100 {
		t.Fatalf("%d records out, want the 100 of the two matching topics", len(got))
	}
}

// TestGroupProtocolShown: /pipelines shows the group protocol each
// source runs: classic by default, consumer (KIP-848) when asked and the
// broker has it (kfake and Kafka 4.x do).
func TestGroupProtocolShown(t *testing.T) {
	b := testenv.Kafka(t)
	in := testenv.Topic(t, "gp-in")
	b.CreateTopic(t, in, 2)
	produceN(t, b.Client(t), in, "k", 10)
	var body strings.Builder
	for _, p := range []string{"default", "classic", "consumer"} {
		key := ""
		if p != "default" {
			key = fmt.Sprintf("group_protocol = %q\n", p)
		}
		fmt.Fprintf(&body, "[[pipeline]]\nname = %q\n[pipeline.source]\ntype = \"kafka\"\ntopics = [%q]\ngroup = %q\n%s[pipeline.sink]\ntype = \"drop\"\n",
			p, in, testenv.Topic(t, "gp-"+p), key)
	}
	addr := runDaemon(t, b, body.String())
	want := map[string]string{"default": "classic", "classic": "classic", "consumer": "consumer"}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/pipelines")
		if err != nil {
			t.Fatal(err)
		}
		var st []struct {
			Name   string            `json:"name"`
			Source map[string]string `json:"source"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatalf("/v1/status: %v", err)
		}
		got := map[string]string{}
		for _, s := range st {
			got[s.Name] = s.Source["group_protocol"]
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			t.Logf("group protocols: %v", got)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/pipelines group protocols %v, want %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCreatedTopicSettings: a topic streamd creates gets [kafka]'s
// partitions, replication factor and topic configs.
func TestCreatedTopicSettings(t *testing.T) {
	b := testenv.Kafka(t)
	out := testenv.Topic(t, "created")
	runDaemon(t, b, fmt.Sprintf(`partitions = 3
replication_factor = 1
topic_configs = { "retention.ms" = "3600000", "cleanup.policy" = "compact" }
[[pipeline]]
name = "gen"
[pipeline.source]
type = "generate"
count = 10
[pipeline.sink]
type = "kafka"
topic = %q
acks = "1"
linger = "5ms"
`, out))
	if got := consumeAll(t, b, out, 10, time.Minute); len(got) != 10 {
		t.Fatalf("%d records out", len(got))
	}
	adm := kadm.NewClient(b.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, out)
	if err != nil || td[out].Err != nil {
		t.Fatal(err, td[out].Err)
	}
	if n := len(td[out].Partitions); n != 3 {
		t.Errorf("%d partitions, want 3", n)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]string{}
	for _, c := range rc[0].Configs {
		cfg[c.Key] = c.MaybeValue()
	}
	if cfg["retention.ms"] != "3600000" || cfg["cleanup.policy"] != "compact" {
		t.Errorf("topic configs: retention.ms %q, cleanup.policy %q", cfg["retention.ms"], cfg["cleanup.policy"])
	}
}

// TestReadCommitted: isolation_level = "read_committed" skips the records
// of an aborted transaction; read_uncommitted reads them.
func TestReadCommitted(t *testing.T) {
	b := testenv.Kafka(t)
	in := testenv.Topic(t, "txn-in")
	b.CreateTopic(t, in, 1)
	for _, commit := range []bool{true, false} {
		cl := b.Client(t, kgo.TransactionalID(testenv.Topic(t, "txn")))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		prefix := map[bool]string{true: "committed", false: "aborted"}[commit]
		for i := range 5 {
			cl.Produce(ctx, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "%s-%d", prefix, i)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	outC, outU := testenv.Topic(t, "txn-committed"), testenv.Topic(t, "txn-uncommitted")
	runDaemon(t, b, fmt.Sprintf(`[[pipeline]]
name = "committed"
[pipeline.source]
type = "kafka"
topics = [%[1]q]
group = %[2]q
isolation_level = "read_committed"
[pipeline.sink]
type = "kafka"
topic = %[3]q
[[pipeline]]
name = "uncommitted"
[pipeline.source]
type = "kafka"
topics = [%[1]q]
group = %[4]q
[pipeline.sink]
type = "kafka"
topic = %[5]q
`, in, testenv.Topic(t, "gc"), outC, testenv.Topic(t, "gu"), outU))
	if got := consumeAll(t, b, outU, 10, time.Minute); len(got) != 10 {
		t.Fatalf("read_uncommitted: %d records, want all 10", len(got))
	}
	// One reader: the 5 committed records within a minute, then 5 s more
	// on the same client for anything after them (a new client's start
	// alone can take longer than that on a loaded real broker).
	cl := b.Client(t, kgo.ConsumeTopics(outC), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]string{}
	poll := func(want int, wait time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		for len(got) < want && ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Key)] = string(r.Value) })
		}
	}
	poll(5, time.Minute)
	poll(6, 5*time.Second)
	for k := range got {
		if strings.HasPrefix(k, "aborted") {
			t.Fatalf("read_committed passed %s of an aborted transaction", k)
		}
	}
	if len(got) != 5 {
		t.Fatalf("read_committed: %d records, want the 5 committed", len(got))
	}
}
