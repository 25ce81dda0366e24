package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestExactlyOnceRestartsAfterFailedWrite: an exactly-once pipeline whose
// sink topic is deleted under it fails a write inside a transaction (the
// producer gives up on the unknown topic); the transaction aborts and the
// pipeline starts again by itself from the last committed offsets, so a
// read_committed reader of the re-created topic sees every record
// produced after the deletion exactly once, and none of those committed
// before it again. /v1/status and /metrics count the restart. Before,
// the pipeline stayed failed until an operator restarted it.
func TestExactlyOnceRestartsAfterFailedWrite(t *testing.T) {
	b := testenv.Kafka(t)
	in, out := testenv.Topic(t, "eor-in"), testenv.Topic(t, "eor-out")
	b.CreateTopic(t, in, 2)
	b.CreateTopic(t, out, 2)
	addr := runDaemon(t, b, fmt.Sprintf(`[[pipeline]]
name = "eo"
delivery = "exactly-once"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[pipeline.sink]
type = "kafka"
topic = %q
`, in, testenv.Topic(t, "eor-g"), out))
	const n = 200
	pcl := b.Client(t)
	produceN(t, pcl, in, "a", n)
	if got := readCommitted(t, b, out, "a", n, time.Minute); len(got) != n {
		t.Fatalf("before the deletion: %d of %d records", len(got), n)
	}

	adm := kadm.NewClient(b.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := adm.DeleteTopic(ctx, out); err != nil || resp.Err != nil {
		t.Fatalf("delete %s: %v %v", out, err, resp.Err)
	}
	produceN(t, pcl, in, "b", n)

	got := readCommitted(t, b, out, "b", n, 2*time.Minute)
	var missing, dups []string
	for i := range n {
		k := fmt.Sprintf("b-%d", i)
		switch got[k] {
		case 0:
			missing = append(missing, k)
		case 1:
		default:
			dups = append(dups, k)
		}
	}
	for k, c := range got {
		if !strings.HasPrefix(k, "b-") {
			t.Errorf("%s (%d times): committed before the deletion, read again after the restart", k, c)
		}
	}
	if len(missing) > 0 || len(dups) > 0 {
		t.Fatalf("after the deletion: %d missing %v, %d duplicated %v", len(missing), head(missing), len(dups), head(dups))
	}

	var st struct {
		Pipelines []struct {
			Name         string `json:"name"`
			State        string `json:"state"`
			Restarts     int    `json:"restarts"`
			AutoRestarts int    `json:"auto_restarts"`
			LastRestart  string `json:"last_restart_cause"`
		} `json:"pipelines"`
	}
	getJSON(t, "http://"+addr+"/v1/status", &st)
	if len(st.Pipelines) != 1 {
		t.Fatalf("/v1/status: %+v", st)
	}
	p := st.Pipelines[0]
	if p.State != "running" || p.AutoRestarts < 1 || p.Restarts < p.AutoRestarts || !strings.Contains(p.LastRestart, "inside a transaction") {
		t.Fatalf("/v1/status: %+v, want running with auto_restarts >= 1 and the cause", p)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	want := fmt.Sprintf(`streamd_pipeline_auto_restarts_total{pipeline="eo"} %d`, p.AutoRestarts)
	if !strings.Contains(string(body), want) {
		t.Fatalf("/metrics has no %s", want)
	}
	t.Logf("auto restarts %d (restarts %d); cause: %s", p.AutoRestarts, p.Restarts, p.LastRestart)
}

// readCommitted reads topic from the start with isolation level
// read_committed until want distinct keys with prefix came (and a second
// more, to see late duplicates) or wait passed; it returns how often each
// key came.
func readCommitted(t *testing.T, b *testenv.Broker, topic, prefix string, want int, wait time.Duration) map[string]int {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	got := map[string]int{}
	seen := 0
	var full time.Time
	for ctx.Err() == nil {
		if seen >= want {
			if full.IsZero() {
				full = time.Now()
			} else if time.Since(full) > time.Second {
				break
			}
		}
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			if got[k] == 0 && strings.HasPrefix(k, prefix) {
				seen++
			}
			got[k]++
		})
		pcancel()
	}
	return got
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(resp.Body.Close)
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}
