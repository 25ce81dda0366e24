package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// reloadPipelines is the [[pipeline]] part of the reload test's config:
// keep (kafka -> kafka), change (a codec stage of codec), and the
// pipelines named in extra (gone, added).
func reloadPipelines(topic func(string) string, codec string, names ...string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, `
[[pipeline]]
name = %q
commit_interval = "200ms"
shutdown_timeout = "10s"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
`, n, topic("in-"+n), topic("g-"+n))
		if n == "change" {
			fmt.Fprintf(&b, `[[pipeline.transform]]
type = "codec"
codec = %q
mode = "encode"
`, codec)
		}
		fmt.Fprintf(&b, `[pipeline.sink]
type = "kafka"
topic = %q
`, topic("out-"+n))
	}
	return b.String()
}

// decodeCodec decodes a gzip or zstd value (or a plain one) and says which.
func decodeCodec(v []byte) ([]byte, string, error) {
	switch {
	case bytes.HasPrefix(v, []byte{0x1f, 0x8b}):
		r, err := gzip.NewReader(bytes.NewReader(v))
		if err != nil {
			return nil, "", err
		}
		b, err := io.ReadAll(r)
		return b, "gzip", err
	case bytes.HasPrefix(v, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		d, err := zstd.NewReader(nil)
		if err != nil {
			return nil, "", err
		}
		defer d.Close()
		b, err := d.DecodeAll(v, nil)
		return b, "zstd", err
	}
	return v, "none", nil
}

// TestReloadAppliesDiff: a daemon with three
// pipelines moving records; the file is edited (change's transform
// changed, gone removed, added added, keep untouched) and SIGHUP sent:
// keep shows no rebalance (same member, generation, assignment count, no
// revoke, not restarted) and no gap in its progress; change drains and
// resumes with the new transform; zero records lost across all of them
// (per key, in order). Then a broken file (misspelt key) and SIGHUP:
// nothing changes, the error with FILE:LINE is logged, kept in
// /v1/status, counted in streamd_config_reloads_total and shown by
// `streamd ctl status`.
func TestReloadAppliesDiff(t *testing.T) {
	b := testenv.Kafka(t)
	topics := map[string]string{}
	topic := func(base string) string {
		if topics[base] == "" {
			topics[base] = testenv.Topic(t, base)
		}
		return topics[base]
	}
	for _, n := range []string{"keep", "change", "gone", "added"} {
		b.CreateTopic(t, topic("in-"+n), 4)
		b.CreateTopic(t, topic("out-"+n), 4)
	}
	head := fmt.Sprintf("data_dir = %q\n", t.TempDir()) + brokersTOML(b) + fmt.Sprintf("[admin]\nlisten = %q\n", freePort(t))
	cfg := writeConfig(t, head+reloadPipelines(topic, "gzip", "keep", "change", "gone"))
	f := startFlow(t, b, 200, 20, topic("in-keep"), topic("in-change"), topic("in-gone"), topic("in-added"))
	d := start(t, cfg)
	addr := d.adminAddr(t)
	for _, n := range []string{"keep", "change", "gone"} {
		waitPipeline(t, addr, n, "ready, assigned and writing", 90*time.Second, func(p *adminPipeline) bool {
			return p.Ready && p.Group != nil && len(p.Group.Assigned) > 0 && p.Out > 100
		})
	}
	before := *pipelineOf(status(t, addr), "keep")

	// Sample keep's progress around the reload.
	type sample struct {
		at  time.Time
		out int64
	}
	var samples []sample
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if p := pipelineOf(status(t, addr), "keep"); p != nil {
				samples = append(samples, sample{time.Now(), p.Out})
			}
			select {
			case <-sampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	time.Sleep(time.Second)
	if err := os.WriteFile(cfg, []byte(head+reloadPipelines(topic, "zstd", "keep", "change", "added")), 0o644); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	d.signal(t, syscall.SIGHUP)
	st := status(t, addr)
	for deadline := time.Now().Add(time.Minute); st.LastReload == nil; st = status(t, addr) {
		if time.Now().After(deadline) {
			t.Fatal("no reload result in /v1/status a minute after SIGHUP")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := st.LastReload
	t.Logf("reload: ok %v, took %s (%s after SIGHUP): unchanged %v, changed %v, added %v, removed %v",
		r.OK, r.Took, time.Since(sent).Round(time.Millisecond), r.Unchanged, r.Changed, r.Added, r.Removed)
	if !r.OK || fmt.Sprint(r.Unchanged, r.Changed, r.Added, r.Removed) != "[keep] [change] [added] [gone]" {
		t.Fatalf("reload result %+v", r)
	}
	changed := waitPipeline(t, addr, "change", "running again and writing", 90*time.Second, func(p *adminPipeline) bool {
		return p.Ready && p.Out > 50 && p.Restarts == 1
	})
	waitPipeline(t, addr, "added", "writing", 90*time.Second, func(p *adminPipeline) bool { return p.Ready && p.Out > 50 })
	time.Sleep(2 * time.Second)
	close(sampling)
	<-sampled
	after := *pipelineOf(status(t, addr), "keep")
	if pipelineOf(status(t, addr), "gone") != nil {
		t.Fatal("the removed pipeline is still in /v1/status")
	}
	g0, g1 := before.Group, after.Group
	t.Logf("keep before: generation %d, member %s, assignments %d, revokes %d; after: generation %d, member %s, assignments %d, revokes %d, restarts %d",
		g0.Generation, g0.MemberID, g0.Assignments, g0.Revokes, g1.Generation, g1.MemberID, g1.Assignments, g1.Revokes, after.Restarts)
	if g1.Generation != g0.Generation || g1.MemberID != g0.MemberID || g1.Assignments != g0.Assignments || g1.Revokes != g0.Revokes ||
		after.Restarts != 0 || !after.Since.Equal(before.Since) || after.Paused {
		t.Fatalf("the untouched pipeline was touched: before %+v, after %+v", before, after)
	}
	// No gap: keep's output grew in every second of the window.
	var gap time.Duration
	for i, last := 1, 0; i < len(samples); i++ {
		if samples[i].out > samples[last].out {
			last = i
			continue
		}
		gap = max(gap, samples[i].at.Sub(samples[last].at))
	}
	t.Logf("keep: %d samples over %s around the reload, longest time without new output %s (records arrive every 20 ms); change restarted with generation %d",
		len(samples), samples[len(samples)-1].at.Sub(samples[0].at).Round(time.Millisecond), gap.Round(time.Millisecond), changed.Group.Generation)
	if gap > 1500*time.Millisecond {
		t.Fatalf("the untouched pipeline made no progress for %s during the reload", gap)
	}

	// A broken file: nothing changes.
	broken := strings.Replace(head+reloadPipelines(topic, "zstd", "keep", "change", "added"), "topics = [", "topcis = [", 1)
	if err := os.WriteFile(cfg, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	line := 0
	for i, l := range strings.Split(broken, "\n") {
		if strings.HasPrefix(l, "topcis") {
			line = i + 1
			break
		}
	}
	d.signal(t, syscall.SIGHUP)
	for deadline := time.Now().Add(time.Minute); status(t, addr).ReloadError == ""; {
		if time.Now().After(deadline) {
			t.Fatal("no reload error in /v1/status a minute after SIGHUP with a broken file")
		}
		time.Sleep(50 * time.Millisecond)
	}
	st = status(t, addr)
	where := fmt.Sprintf("%s:%d:", cfg, line)
	if !strings.Contains(st.ReloadError, where) || !strings.Contains(st.ReloadError, "unknown key") {
		t.Fatalf("reload error %q, want %s ... unknown key", st.ReloadError, where)
	}
	if !strings.Contains(d.logText(), "config reload refused") || !strings.Contains(d.logText(), where) {
		t.Fatalf("the refusal is not logged with %s:\n%s", where, tail(d.logText(), 2000))
	}
	out, _, code := ctl(t, cfg, "status")
	if code != 0 || !strings.Contains(out, "REFUSED") || !strings.Contains(out, where) {
		t.Fatalf("streamd ctl status (exit %d):\n%s", code, out)
	}
	t.Logf("streamd ctl status after the broken reload:\n%s", out)
	if m := metric(t, addr, `streamd_config_reloads_total{result="error"}`); m != "1" {
		t.Fatalf("streamd_config_reloads_total{result=\"error\"} = %q", m)
	}
	still := *pipelineOf(st, "keep")
	if still.Group.Generation != g0.Generation || still.Restarts != 0 || len(st.Pipelines) != 3 {
		t.Fatalf("a refused reload changed something: %+v", st)
	}

	// Zero records lost, per key and in order, in every output.
	produced := f.halt()
	if err := f.failed(); err != nil {
		t.Fatalf("producer: %v", err)
	}
	var report []string
	for _, n := range []string{"keep", "change", "added"} {
		got := readKeyed(t, b, topic("out-"+n), produced[topic("in-"+n)], 2*time.Minute, func(v []byte) (string, int, error) {
			plain, _, err := decodeCodec(v)
			if err != nil {
				return "", 0, err
			}
			return decodeKN(plain)
		})
		dups := got.check(t, n, produced[topic("in-"+n)])
		report = append(report, fmt.Sprintf("%s %d dup", n, dups))
	}
	// change: gzip before the reload, zstd after, never back.
	codecs := readCodecs(t, b, topic("out-change"))
	for _, p := range strings.Split(codecs, " | ") {
		if p != "gzip zstd" {
			t.Fatalf("change's output codecs per partition, in order: %s (want gzip then zstd in each)", codecs)
		}
	}
	// gone: drained and committed: its output holds one copy of every
	// record below the committed offsets.
	var committedN int64
	for _, o := range committed(t, b, topic("g-gone"), topic("in-gone")) {
		committedN += o
	}
	seen := map[string]bool{}
	for _, r := range readQuiet(t, b, topic("out-gone"), 10*time.Second) {
		seen[string(r.Value)] = true // {"k":K,"n":N}: one per input record
	}
	distinct := len(seen)
	t.Logf("outputs: %s; gone: %d records out, %d committed", strings.Join(report, ", "), distinct, committedN)
	if int64(distinct) != committedN {
		t.Fatalf("removed pipeline: %d distinct records written, %d committed: not drained", distinct, committedN)
	}
	d.signal(t, syscall.SIGTERM)
	if err := <-d.done; err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

// readCodecs returns the codec of every record of topic, per partition in
// offset order, joined ("gzip gzip zstd | gzip zstd ...").
func readCodecs(t testing.TB, b *testenv.Broker, topic string) string {
	t.Helper()
	recs := readQuiet(t, b, topic, 10*time.Second)
	var parts []string
	for p := int32(0); p < 64; p++ {
		var cs []string
		for _, r := range recs {
			if r.Partition == p {
				_, c, _ := decodeCodec(r.Value)
				if len(cs) == 0 || cs[len(cs)-1] != c {
					cs = append(cs, c)
				}
			}
		}
		if len(cs) > 0 {
			parts = append(parts, strings.Join(cs, " "))
		}
	}
	return strings.Join(parts, " | ")
}

// readQuiet reads topic from the start until nothing new came for quiet.
func readQuiet(t testing.TB, b *testenv.Broker, topic string, quiet time.Duration) []*kgo.Record {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []*kgo.Record
	last := time.Now()
	for time.Since(last) < quiet {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			last = time.Now()
		})
	}
	return out
}

// metric returns the value of one series of /metrics, "" if absent.
func metric(t testing.TB, addr, series string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(resp.Body.Close)
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return ""
}
