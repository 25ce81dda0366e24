package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// Helpers of the service tests: the admin address of a daemon,
// its /v1/status, `streamd ctl`, and a producer that keeps records flowing.

var adminRE = regexp.MustCompile(`msg="admin server listening" addr=(\S+)`)

// adminAddr waits for the daemon to log its admin address.
func (d *daemon) adminAddr(t testing.TB) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if m := adminRE.FindStringSubmatch(d.logText()); m != nil {
			return m[1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no admin address in the log:\n%s", tail(d.logText(), 3000))
	return ""
}

// logText is the daemon's output so far.
func (d *daemon) logText() string { return d.log.String() }

// status GETs /v1/status.
func status(t testing.TB, addr string) app.Status {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/status")
	if err != nil {
		t.Fatalf("GET /v1/status: %v", err)
	}
	defer testenv.Ignore(resp.Body.Close)
	var st app.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/status: %d %v", resp.StatusCode, err)
	}
	return st
}

type adminPipeline = app.PipelineStatus

func pipelineOf(st app.Status, name string) *app.PipelineStatus {
	for i := range st.Pipelines {
		if st.Pipelines[i].Name == name {
			return &st.Pipelines[i]
		}
	}
	return nil
}

// waitPipeline polls /v1/status until cond holds for pipeline name.
func waitPipeline(t testing.TB, addr, name, what string, d time.Duration, cond func(*app.PipelineStatus) bool) app.PipelineStatus {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st := status(t, addr)
		if p := pipelineOf(st, name); p != nil && cond(p) {
			return *p
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(st, "", "  ")
			t.Fatalf("pipeline %s: %s: not within %s; status:\n%s", name, what, d, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ctl runs `streamd ctl -c cfg args...` and returns its stdout, stderr and
// exit code.
func ctl(t testing.TB, cfg string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(streamdBin, append([]string{"ctl", "-c", cfg}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("streamd ctl: %v", err)
	}
	return out.String(), errb.String(), code
}

// flow produces to its topics at a steady rate until stopped: record i of
// key k has value {"k":K,"n":N} (N counting that key's records) and the
// header seq=i. keys keys are spread over the topics' partitions by the
// default partitioner (key hash), so each key's order is a partition's.
type flow struct {
	cl     *kgo.Client
	topics []string
	keys   int
	rate   int // per topic, records per second

	mu       sync.Mutex
	produced map[string]map[string]int // topic -> key -> records
	stop     chan struct{}
	done     chan struct{}
	err      error
}

func startFlow(t testing.TB, b *testenv.Broker, rate, keys int, topics ...string) *flow {
	t.Helper()
	f := &flow{cl: b.Client(t, kgo.ProducerLinger(5*time.Millisecond)), topics: topics, keys: keys, rate: rate,
		produced: map[string]map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, tp := range topics {
		f.produced[tp] = map[string]int{}
	}
	go f.run()
	t.Cleanup(func() { f.halt() })
	return f
}

func (f *flow) run() {
	defer close(f.done)
	const tick = 20 * time.Millisecond
	per := max(1, f.rate*int(tick)/int(time.Second))
	t := time.NewTicker(tick)
	defer t.Stop()
	next := map[string]int{}
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		var recs []*kgo.Record
		f.mu.Lock()
		for _, tp := range f.topics {
			for range per {
				k := "k-" + strconv.Itoa(next[tp]%f.keys)
				next[tp]++
				n := f.produced[tp][k]
				f.produced[tp][k] = n + 1
				recs = append(recs, &kgo.Record{Topic: tp, Key: []byte(k), Value: []byte(fmt.Sprintf(`{"k":%q,"n":%d}`, k, n))})
			}
		}
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := f.cl.ProduceSync(ctx, recs...).FirstErr()
		cancel()
		if err != nil {
			f.mu.Lock()
			f.err = err
			f.mu.Unlock()
			return
		}
	}
}

// halt stops producing and returns what was produced per topic and key.
func (f *flow) halt() map[string]map[string]int {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.produced
}

func (f *flow) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// keyed are the records of a topic by key, each record's n in output order.
type keyed map[string][]int

// readKeyed reads topic from the start until it holds at least want[key]
// distinct n for every key of want, or timeout; decode turns a record's
// value into its key and n.
func readKeyed(t testing.TB, b *testenv.Broker, topic string, want map[string]int, timeout time.Duration, decode func([]byte) (string, int, error)) keyed {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	out := keyed{}
	distinct := map[string]map[int]bool{}
	complete := func() bool {
		for k, n := range want {
			if len(distinct[k]) < n {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(timeout)
	for !complete() && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			k, n, err := decode(r.Value)
			if err != nil {
				t.Fatalf("%s partition %d offset %d: %v: %.80q", topic, r.Partition, r.Offset, err, r.Value)
			}
			if k != string(r.Key) {
				t.Fatalf("%s partition %d offset %d: key %q, value says %q", topic, r.Partition, r.Offset, r.Key, k)
			}
			out[k] = append(out[k], n)
			if distinct[k] == nil {
				distinct[k] = map[int]bool{}
			}
			distinct[k][n] = true
		})
	}
	return out
}

func decodeKN(v []byte) (string, int, error) {
	var r struct {
		K string `json:"k"`
		N *int   `json:"n"`
	}
	if err := json.Unmarshal(v, &r); err != nil || r.N == nil {
		return "", 0, fmt.Errorf("not a flow record (%v)", err)
	}
	return r.K, *r.N, nil
}

// check compares what a topic holds with what was produced per key: no
// record missing, every key in order allowing replays (a record may come
// again after later ones, as after a kill, but none comes before every
// record before it came once). It returns the duplicates.
func (got keyed) check(t testing.TB, what string, want map[string]int) (dups int) {
	t.Helper()
	for k, n := range want {
		seen := map[int]int{}
		next := 0 // the lowest n not seen yet
		for i, v := range got[k] {
			if v > next {
				t.Fatalf("%s: key %s: record %d came (position %d) before record %d: order lost", what, k, v, i, next)
			}
			seen[v]++
			for seen[next] > 0 {
				next++
			}
		}
		if next < n {
			t.Fatalf("%s: key %s: %d of %d records, first missing %d", what, k, next, n, next)
		}
		dups += len(got[k]) - len(seen)
	}
	return dups
}

// committed returns the group's committed offsets of topic, by partition.
func committed(t testing.TB, b *testenv.Broker, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(b.Client(t)).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("committed offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out
}
