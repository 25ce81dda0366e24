package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// The scale-out run: records flow through a
// kafka -> Go Wasm orders downgrade -> kafka pipeline while instances of
// one config (one data_dir: each takes its own instance-id slot) join,
// leave and die:
//
//	t=0    A starts
//	t=10s  B and C start (the group moves partitions from A to them)
//	t=30s  B gets SIGTERM (drains, commits, leaves)
//	t=45s  C gets SIGKILL (its partitions wait for the session timeout)
//	       once they moved: D starts
//	the producer stops at N records; the output is read back.
//
// Every input record must be in the output, duplicates within the bound
// README "Delivery guarantees" documents, and every key's records in
// input order allowing replays. It reports how long partitions had no
// owner after the SIGTERM and after the SIGKILL.
const (
	scalePartitions    = 12
	scaleKeys          = 1000
	scaleMaxInFlight   = 2000
	scaleCommitEvery   = time.Second
	scaleSessionWindow = 45 * time.Second // kafka.DefaultSessionTimeout; KIP-848: the broker's group.consumer.session.timeout.ms
)

// scaleRecords is how many records flow: 500,000 on a real broker; the
// kfake pass runs a tenth (the same events, on the in-process broker).
func scaleRecords(b *testenv.Broker) int {
	if b.Real {
		return 500_000
	}
	return 50_000
}

func TestScaleOut(t *testing.T) {
	b := testenv.Kafka(t)
	plugin := buildDowngrade(t)
	// The two protocols run side by side (topics, groups and data_dirs of
	// their own): most of each run is waiting for the session timeout and
	// the producer, so one after the other doubled the suite's time.
	for _, proto := range []string{"classic", "consumer"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			scaleOut(t, b, plugin, proto)
		})
	}
}

// buildDowngrade builds examples/wasm/go/orders-downgrade.
func buildDowngrade(t *testing.T) string {
	t.Helper()
	plugin := filepath.Join(t.TempDir(), "orders-downgrade.wasm")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", plugin, ".")
	build.Dir = filepath.Join(repoRoot(t), "examples/wasm/go/orders-downgrade")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build plugin: %v\n%s", err, out)
	}
	return plugin
}

// instance is one streamd process of the scale-out run.
type instance struct {
	name string
	d    *daemon
	addr string
	gone atomic.Bool // signalled: no longer polled
}

// owners is what the poller saw: per poll, which instance had which
// partitions.
type ownerSample struct {
	at     time.Time
	owners map[int32]string // partition -> instance
}

type ownership struct {
	mu      sync.Mutex
	samples []ownerSample
}

// firstOwned returns, for each partition in ps, the first time from t0
// on that an instance other than but owned it.
func (o *ownership) firstOwned(t0 time.Time, ps []int32, but string) map[int32]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[int32]time.Time{}
	for _, s := range o.samples {
		if s.at.Before(t0) {
			continue
		}
		for _, p := range ps {
			if _, done := out[p]; done {
				continue
			}
			if who, ok := s.owners[p]; ok && who != but {
				out[p] = s.at
			}
		}
	}
	return out
}

// ownedBy returns the partitions name owned in the last sample before t.
func (o *ownership) ownedBy(name string, t time.Time) []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int32
	for i := len(o.samples) - 1; i >= 0; i-- {
		if o.samples[i].at.After(t) {
			continue
		}
		for p, who := range o.samples[i].owners {
			if who == name {
				out = append(out, p)
			}
		}
		if len(out) > 0 {
			break
		}
	}
	slices.Sort(out)
	return out
}

var revokedRE = regexp.MustCompile(`time=(\S+) level=INFO msg="partitions revoked"`)

func scaleOut(t *testing.T, b *testenv.Broker, plugin, proto string) {
	n := scaleRecords(b)
	in, out, group := testenv.Topic(t, "in"), testenv.Topic(t, "out"), testenv.Topic(t, "g")
	b.CreateTopic(t, in, scalePartitions)
	b.CreateTopic(t, out, scalePartitions)
	cfg := writeConfig(t, fmt.Sprintf("data_dir = %q\n", t.TempDir())+brokersTOML(b)+fmt.Sprintf(`
[admin]
listen = "127.0.0.1:0"
[[pipeline]]
name = "orders"
max_in_flight = %d
commit_interval = %q
shutdown_timeout = "10s"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
group_protocol = %q
[[pipeline.transform]]
type = "wasm"
path = %q
[pipeline.sink]
type = "kafka"
topic = %q
`, scaleMaxInFlight, scaleCommitEvery.String(), in, group, proto, plugin, out))

	// The producer: n orders over ~125 s, keys c-0..c-999, each key's n
	// counting up.
	rate := max(n/125, 200)
	produced := make([]int, scaleKeys)
	prodDone := make(chan struct{})
	prodErr := make(chan error, 1)
	stopProd := make(chan struct{})
	go func() {
		defer close(prodDone)
		cl := b.Client(t, kgo.ProducerLinger(5*time.Millisecond))
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		per := max(1, rate/50)
		for sent := 0; sent < n; {
			select {
			case <-tick.C:
			case <-stopProd:
				return
			}
			recs := make([]*kgo.Record, 0, per)
			for ; len(recs) < per && sent < n; sent++ {
				k := sent % scaleKeys
				key := "c-" + strconv.Itoa(k)
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte(key), Value: fmt.Appendf(nil,
					`{"order_id":"%s/%d","customer":{"id":%q,"name":"n"},"amount_cents":%d,"currency":"EUR"}`, key, produced[k], key, sent)})
				produced[k]++
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := cl.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				prodErr <- err
				return
			}
		}
	}()
	defer func() {
		select {
		case <-stopProd:
		default:
			close(stopProd)
		}
		<-prodDone
	}()

	// The instances and the poller of their /v1/status.
	var mu sync.Mutex
	var insts []*instance
	own := &ownership{}
	launch := func(name string) *instance {
		d := start(t, cfg)
		i := &instance{name: name, d: d, addr: d.adminAddr(t)}
		mu.Lock()
		insts = append(insts, i)
		mu.Unlock()
		return i
	}
	pollDone := make(chan struct{})
	stopPoll := make(chan struct{})
	go func() {
		defer close(pollDone)
		cl := &http.Client{Timeout: time.Second}
		for {
			select {
			case <-stopPoll:
				return
			case <-time.After(100 * time.Millisecond):
			}
			mu.Lock()
			live := slices.Clone(insts)
			mu.Unlock()
			s := ownerSample{owners: map[int32]string{}}
			for _, i := range live {
				if i.gone.Load() {
					continue
				}
				resp, err := cl.Get("http://" + i.addr + "/v1/status")
				if err != nil {
					continue
				}
				var st app.Status
				err = json.NewDecoder(resp.Body).Decode(&st)
				_ = resp.Body.Close()
				if err != nil {
					continue
				}
				if p := pipelineOf(st, "orders"); p != nil && p.Group != nil {
					for _, part := range p.Group.Assigned[in] {
						s.owners[part] = i.name
					}
				}
			}
			s.at = time.Now()
			own.mu.Lock()
			own.samples = append(own.samples, s)
			own.mu.Unlock()
		}
	}()
	defer func() { close(stopPoll); <-pollDone }()
	owned := func(names ...string) func() bool {
		return func() bool {
			own.mu.Lock()
			defer own.mu.Unlock()
			if len(own.samples) == 0 {
				return false
			}
			last := own.samples[len(own.samples)-1]
			who := map[string]bool{}
			for _, o := range last.owners {
				who[o] = true
			}
			if len(last.owners) != scalePartitions || len(who) != len(names) {
				return false
			}
			for _, nm := range names {
				if !who[nm] {
					return false
				}
			}
			return true
		}
	}
	waitFor := func(what string, d time.Duration, cond func() bool) time.Duration {
		t.Helper()
		t0 := time.Now()
		for !cond() {
			select {
			case err := <-prodErr:
				t.Fatalf("producer: %v", err)
			default:
			}
			if time.Since(t0) > d {
				t.Fatalf("%s: not within %s", what, d)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(t0)
	}
	start := time.Now()
	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

	a := launch("A")
	waitFor("A owns every partition", time.Minute, owned("A"))
	at(10 * time.Second)
	launch("B")
	launch("C")
	took := waitFor("A, B and C share the partitions", 2*time.Minute, owned("A", "B", "C"))
	t.Logf("%s: B and C joined: the partitions are shared by A, B, C %s later", proto, took.Round(100*time.Millisecond))

	at(30 * time.Second)
	bi := insts[1]
	bParts := own.ownedBy("B", time.Now())
	termAt := time.Now()
	bi.d.signal(t, syscall.SIGTERM)
	if err := <-bi.d.done; err != nil {
		t.Fatalf("B after SIGTERM: %v", err)
	}
	bi.gone.Store(true)
	exited := time.Since(termAt)
	waitFor("A and C own every partition after B's SIGTERM", 2*time.Minute, owned("A", "C"))
	afterTerm := own.firstOwned(termAt, bParts, "B")
	revokedAt := termAt
	if m := revokedRE.FindAllStringSubmatch(bi.d.logText(), -1); len(m) > 0 {
		if ts, err := time.Parse(time.RFC3339Nano, m[len(m)-1][1]); err == nil {
			revokedAt = ts
		}
	}
	termGap, termUnowned := spread(afterTerm, termAt), spread(afterTerm, revokedAt)
	t.Logf("%s: SIGTERM of B (exit %s): its partitions %v had a new owner %s after the signal, %s after B let them go (its revoke)",
		proto, exited.Round(10*time.Millisecond), bParts, termGap, termUnowned)
	// B leaves explicitly: its partitions move at the others' next
	// heartbeat (3 s classic, 5 s KIP-848), not after the session timeout.
	if len(afterTerm) != len(bParts) || termUnowned.hi > 15*time.Second {
		t.Fatalf("after B's SIGTERM its partitions had no owner for %s (want seconds, not the session timeout)", termUnowned)
	}

	at(45 * time.Second)
	ci := insts[2]
	cParts := own.ownedBy("C", time.Now())
	killAt := time.Now()
	ci.d.kill(t)
	ci.gone.Store(true)
	waitFor("A owns every partition after C's SIGKILL", 3*time.Minute, owned("A"))
	afterKill := spread(own.firstOwned(killAt, cParts, "C"), killAt)
	t.Logf("%s: SIGKILL of C: its partitions %v had a new owner %s after the kill (session timeout %s)", proto, cParts, afterKill, scaleSessionWindow)
	if afterKill.lo < scaleSessionWindow-5*time.Second {
		t.Fatalf("C's partitions moved %s after its SIGKILL, before the session timeout %s: was C really a static member?", afterKill, scaleSessionWindow)
	}

	launch("D")
	took = waitFor("A and D share the partitions", 2*time.Minute, owned("A", "D"))
	t.Logf("%s: D joined %s after the start: the partitions are shared by A and D %s later", proto, time.Since(start).Round(time.Second), took.Round(100*time.Millisecond))
	select {
	case <-prodDone:
		t.Logf("%s: the producer had finished before D joined (records flowed through the SIGTERM and the SIGKILL only)", proto)
	default:
	}
	<-prodDone
	select {
	case err := <-prodErr:
		t.Fatalf("producer: %v", err)
	default:
	}
	produceEnd := time.Now()

	// Every record in the output, in order per key allowing replays.
	want := map[string]int{}
	for k, c := range produced {
		if c > 0 {
			want["c-"+strconv.Itoa(k)] = c
		}
	}
	got := readKeyed(t, b, out, want, 5*time.Minute, decodeOrder)
	dups := got.check(t, proto, want)
	total := 0
	for _, c := range produced {
		total += c
	}
	// README "Delivery guarantees": a revoke (B, C and D joining, B
	// leaving) at most max_in_flight each; a SIGKILL at most max_in_flight
	// plus what was acknowledged within one commit_interval (at most the
	// input rate times the interval).
	bound := 4*scaleMaxInFlight + scaleMaxInFlight + int(float64(rate)*scaleCommitEvery.Seconds())
	t.Logf("%s: %d records in, all %d out (%d written in all), %d duplicates (bound %d: 4 revokes x max_in_flight %d + a SIGKILL's max_in_flight + %d/s x commit_interval %s); drained %s after the producer ended",
		proto, total, total, total+dups, dups, bound, scaleMaxInFlight, rate, scaleCommitEvery, time.Since(produceEnd).Round(100*time.Millisecond))
	if dups > bound {
		t.Fatalf("%d duplicates, above the documented bound %d", dups, bound)
	}
	for _, i := range []*instance{a, insts[3]} {
		i.d.signal(t, syscall.SIGTERM)
		if err := <-i.d.done; err != nil {
			t.Fatalf("%s after SIGTERM: %v", i.name, err)
		}
		i.gone.Store(true)
	}
}

// gap is how long after t0 the partitions of first got an owner: the
// longest (hi) and the shortest (lo).
type gap struct{ lo, hi time.Duration }

func spread(first map[int32]time.Time, t0 time.Time) gap {
	g := gap{lo: -1}
	for _, at := range first {
		d := max(at.Sub(t0), 0)
		g.hi = max(g.hi, d)
		if g.lo < 0 || d < g.lo {
			g.lo = d
		}
	}
	return g
}

func (g gap) String() string {
	return fmt.Sprintf("%s (the first %s)", g.hi.Round(100*time.Millisecond), g.lo.Round(100*time.Millisecond))
}

// decodeOrder reads a downgraded order: its order_id is KEY/N.
func decodeOrder(v []byte) (string, int, error) {
	var o struct {
		OrderID    string `json:"order_id"`
		CustomerID string `json:"customer_id"`
	}
	if err := json.Unmarshal(v, &o); err != nil || o.CustomerID == "" {
		return "", 0, fmt.Errorf("not a downgraded order (%v)", err)
	}
	k, ns, ok := strings.Cut(o.OrderID, "/")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || k != o.CustomerID {
		return "", 0, fmt.Errorf("order_id %q", o.OrderID)
	}
	return k, n, nil
}
