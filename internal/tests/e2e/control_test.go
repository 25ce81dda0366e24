package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestPauseResume: `streamd ctl pause` while
// records flow: the group's committed offsets stop moving within one
// commit interval (after the in-flight records finished), no rebalance
// happens (same generation and member, seen by the broker too), the
// pipeline stays ready and is not reported stalled; `streamd ctl resume`
// continues with nothing lost. A pipeline with `paused = true` starts
// paused: connected and assigned, nothing read, until resumed.
func TestPauseResume(t *testing.T) {
	b := testenv.Kafka(t)
	in, out, group := testenv.Topic(t, "in"), testenv.Topic(t, "out"), testenv.Topic(t, "g")
	inQ, outQ, groupQ := testenv.Topic(t, "inq"), testenv.Topic(t, "outq"), testenv.Topic(t, "gq")
	for _, tp := range []string{in, out, inQ, outQ} {
		b.CreateTopic(t, tp, 4)
	}
	const commitInterval = 500 * time.Millisecond
	cfg := writeConfig(t, fmt.Sprintf("data_dir = %q\n", t.TempDir())+brokersTOML(b)+fmt.Sprintf(`
[admin]
listen = %q
[[pipeline]]
name = "p"
commit_interval = %q
stall_timeout = "2s"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[pipeline.sink]
type = "kafka"
topic = %q
[[pipeline]]
name = "q"
paused = true
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[pipeline.sink]
type = "kafka"
topic = %q
`, freePort(t), commitInterval.String(), in, group, out, inQ, groupQ, outQ))
	f := startFlow(t, b, 300, 20, in, inQ)
	d := start(t, cfg)
	addr := d.adminAddr(t)
	before := waitPipeline(t, addr, "p", "writing", 90*time.Second, func(p *adminPipeline) bool { return p.Ready && p.Out > 200 })
	q := waitPipeline(t, addr, "q", "ready and assigned, paused", 90*time.Second, func(p *adminPipeline) bool {
		return p.Ready && p.Paused && p.Group != nil && len(p.Group.Assigned) > 0
	})
	if q.In != 0 {
		t.Fatalf("q, paused = true, read %d records", q.In)
	}
	adm := kadm.NewClient(b.Client(t))
	describe := func(g string) kadm.DescribedGroup {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, g)
		if err != nil {
			t.Fatalf("describe %s: %v", g, err)
		}
		return gs[g]
	}
	g0 := describe(group)

	outText, errText, code := ctl(t, cfg, "pause", "p")
	paused := time.Now()
	if code != 0 || !strings.HasPrefix(outText, "p paused") {
		t.Fatalf("streamd ctl pause p: exit %d\n%s%s", code, outText, errText)
	}
	// Committed offsets: the last change after the pause, then none.
	last, lastChange := committed(t, b, group, in), paused
	for time.Since(paused) < 6*time.Second {
		time.Sleep(100 * time.Millisecond)
		if c := committed(t, b, group, in); !maps.Equal(c, last) {
			last, lastChange = c, time.Now()
		}
	}
	st := waitPipeline(t, addr, "p", "paused", time.Second, func(p *adminPipeline) bool { return p.Paused })
	settled := lastChange.Sub(paused)
	t.Logf("paused: committed offsets last moved %s after the pause (commit_interval %s), then not for %s; in flight %d, lag %v",
		settled.Round(10*time.Millisecond), commitInterval, time.Since(lastChange).Round(100*time.Millisecond), st.InFlight, st.Lag)
	if settled > commitInterval+time.Second {
		t.Fatalf("committed offsets still moved %s after the pause", settled)
	}
	behind := int64(0)
	for _, l := range st.Lag {
		behind += l
	}
	if !st.Ready || st.Stalled || st.InFlight != 0 || behind < 500 {
		t.Fatalf("paused for 6 s (stall_timeout 2s): want ready, not stalled, nothing in flight, lag growing: %+v", st)
	}
	g1 := describe(group)
	if st.Group.Generation != before.Group.Generation || st.Group.MemberID != before.Group.MemberID || st.Group.Revokes != 0 ||
		g1.State != "Stable" || len(g1.Members) != 1 || g1.Members[0].MemberID != g0.Members[0].MemberID {
		t.Fatalf("a rebalance happened while paused: before %+v / %+v, after %+v / %+v", before.Group, g0, st.Group, g1)
	}

	for _, n := range []string{"p", "q"} {
		if outText, errText, code := ctl(t, cfg, "resume", n); code != 0 || !strings.HasPrefix(outText, n+" resumed") {
			t.Fatalf("streamd ctl resume %s: exit %d\n%s%s", n, code, outText, errText)
		}
	}
	if outText, _, code := ctl(t, cfg, "resume", "p"); code != 0 || !strings.HasPrefix(outText, "p was already resumed") {
		t.Fatalf("second resume: exit %d: %s", code, outText)
	}
	if _, errText, code := ctl(t, cfg, "pause", "nope"); code != 1 || !strings.Contains(errText, "404") {
		t.Fatalf("pause of an unknown pipeline: exit %d: %s", code, errText)
	}
	time.Sleep(time.Second)
	produced := f.halt()
	if err := f.failed(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, in, out string }{{"p", in, out}, {"q", inQ, outQ}} {
		got := readKeyed(t, b, tc.out, produced[tc.in], 2*time.Minute, decodeKN)
		if dups := got.check(t, tc.name, produced[tc.in]); dups != 0 {
			t.Fatalf("%s: %d duplicates after pause and resume", tc.name, dups)
		}
	}
	end := *pipelineOf(status(t, addr), "p")
	if end.Group.Generation != before.Group.Generation || end.Group.Revokes != 0 {
		t.Fatalf("after resume: %+v, before %+v", end.Group, before.Group)
	}
	d.signal(t, syscall.SIGTERM)
	if err := <-d.done; err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}
