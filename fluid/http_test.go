package fluid

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/x/kgox"
)

func TestHTTPErrors(t *testing.T) {
	h := newHarness(t, 1, 4)
	missing := testenv.Topic(t, "missing")
	// payments is in the metadata but not in Kafka.
	tests := []struct {
		method, path string
		code         int
		param        string
	}{
		{"GET", "/fluid/downgrade-topic?group=g&compatible-schema-version=1", 400, "topic"},
		{"GET", "/fluid/downgrade-topic?topic=" + h.topic + "&compatible-schema-version=1", 400, "group"},
		{"GET", "/fluid/downgrade-topic?topic=" + h.topic + "&group=g", 400, "compatible-schema-version"},
		{"GET", "/fluid/downgrade-topic?topic=" + h.topic + "&group=g&compatible-schema-version=x", 400, "compatible-schema-version"},
		{"GET", "/fluid/downgrade-topic?topic=" + h.topic + "&group=g&compatible-schema-version=0", 400, "compatible-schema-version"},
		{"GET", "/fluid/downgrade-topic?topic=" + h.topic + "&group=g&compatible-schema-version=9", 404, "compatible-schema-version"},
		{"GET", "/fluid/downgrade-topic?topic=" + missing + "&group=g&compatible-schema-version=1", 404, "topic"},
		{"GET", "/fluid/downgrade-topic?topic=payments&group=g&compatible-schema-version=1", 404, "topic"},
		{"GET", "/fluid/compatible?observed-schema-version=1&compatible-schema-version=1", 400, "topic"},
		{"GET", "/fluid/compatible?topic=" + h.topic + "&compatible-schema-version=1", 400, "observed-schema-version"},
		{"GET", "/fluid/compatible?topic=" + h.topic + "&observed-schema-version=1", 400, "compatible-schema-version"},
		{"GET", "/fluid/compatible?topic=" + h.topic + "&observed-schema-version=-1&compatible-schema-version=1", 400, "observed-schema-version"},
		{"GET", "/fluid/compatible?topic=" + h.topic + "&observed-schema-version=7&compatible-schema-version=1", 404, "observed-schema-version"},
		{"GET", "/fluid/compatible?topic=" + h.topic + "&observed-schema-version=1&compatible-schema-version=7", 404, "compatible-schema-version"},
		{"GET", "/fluid/compatible?topic=" + missing + "&observed-schema-version=1&compatible-schema-version=1", 404, "topic"},
		{"DELETE", "/fluid/topics/" + missing + "/groups/g/schema-version", 404, "topic"},
		{"DELETE", "/fluid/topics/" + h.topic + "/groups/nobody/schema-version", 404, "group"},
		// Answers as the docs describe them (wrong status codes were a bug).
		{"GET", "/fluid/compatible?topic=payments&observed-schema-version=1&compatible-schema-version=1", 404, "topic"},
		{"GET", "/fluid/compatible?topic=payments&observed-schema-version=2&compatible-schema-version=1", 404, "topic"},
		{"POST", "/fluid/downgrade-topic?topic=" + h.topic + "&group=g&compatible-schema-version=1", 405, ""},
		{"PUT", "/fluid/compatible?topic=" + h.topic + "&observed-schema-version=1&compatible-schema-version=1", 405, ""},
		{"GET", "/fluid/topics/" + h.topic + "/groups/g/schema-version", 405, ""},
		{"POST", "/fluid/status", 405, ""},
		{"DELETE", "/fluid/topics//groups/g/schema-version", 400, "topic"},
		{"DELETE", "/fluid/topics/" + h.topic + "/groups//schema-version", 400, "group"},
		{"DELETE", "/fluid/topics/" + h.topic + "/groups/g", 404, ""},
		{"GET", "/fluid/nothing", 404, ""},
		{"GET", "/fluid/downgrade-topic?topic=" + h.topic + "&topic=" + missing + "&group=g&compatible-schema-version=1", 400, "topic"},
		{"GET", "/fluid/downgrade-topic?topic=" + h.topic + "&group=g&group=h&compatible-schema-version=1", 400, "group"},
		{"GET", "/fluid/downgrade-topic?topic=" + h.topic + "&group=g&compatible-schema-version=1&compatible-schema-version=2", 400, "compatible-schema-version"},
		{"GET", "/fluid/compatible?topic=" + h.topic + "&topic=" + h.topic + "&observed-schema-version=1&compatible-schema-version=1", 400, "topic"},
		{"GET", "/fluid/compatible?topic=" + h.topic + "&observed-schema-version=1&observed-schema-version=2&compatible-schema-version=1", 400, "observed-schema-version"},
	}
	// Redirects are answers too: do not follow them.
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, h.srv.URL+tt.path, nil)
		resp, err := cl.Do(req)
		must(t, err)
		var e apiError
		jerr := json.NewDecoder(resp.Body).Decode(&e)
		_ = resp.Body.Close()
		if resp.StatusCode != tt.code || e.Parameter != tt.param || e.Error == "" || jerr != nil {
			t.Errorf("%s %s: %d %+v (JSON: %v), want %d naming %q", tt.method, tt.path, resp.StatusCode, e, jerr, tt.code, tt.param)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", tt.method, tt.path, ct)
		}
		if tt.code == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tt.method, tt.path)
		}
	}
}

func TestCompatibleAnswers(t *testing.T) {
	h := newHarness(t, 1, 4)
	for _, tt := range []struct {
		topic string
		o, c  string
		want  bool
	}{
		{h.topic, "3", "3", true},
		{h.topic, "4", "3", false},
		{h.topic, "v4", "v2", false},
		{h.topic, "2", "3", false},
	} {
		var got struct{ Compatible bool }
		httpGetJSON(t, h.srv.URL+"/fluid/compatible?topic="+tt.topic+"&observed-schema-version="+tt.o+"&compatible-schema-version="+tt.c, &got)
		if got.Compatible != tt.want {
			t.Errorf("compatible(%s,%s,%s)=%v", tt.topic, tt.o, tt.c, got.Compatible)
		}
	}
	// Nobody is on v3: an incompatible answer starts nothing.
	if st := h.bridge.Status(); len(st.Republishing) != 0 {
		t.Fatalf("republishing with no group: %+v", st)
	}
}

// TestUpgradeNeedsEmptyGroup: offsets can only move while the group has no
// members, so DELETE answers 409 while the consumer is running.
func TestUpgradeNeedsEmptyGroup(t *testing.T) {
	h := newHarness(t, 1, 4)
	h.produce(4, seq(0, 10)...)
	c := h.consumer("busy", 3)
	s := newSeen(t, h.meta, h.topic, 3)
	s.pollUntil(c, 10)
	req, _ := http.NewRequest(http.MethodDelete, h.srv.URL+"/fluid/topics/"+h.topic+"/groups/"+h.g("busy")+"/schema-version", nil)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("DELETE with an active member: %d, want 409", resp.StatusCode)
	}
	testenv.Close(t, context.Background(), c)
	resp, err = http.DefaultClient.Do(req)
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE after close: %d", resp.StatusCode)
	}
	// The main-topic offset is past the last downgraded record.
	off, err := kadm.NewClient(h.prod).FetchOffsets(context.Background(), h.g("busy"))
	must(t, err)
	if o, ok := off.Lookup(h.topic, 0); !ok || o.At != 10 {
		t.Fatalf("main offset after upgrade: %+v", o)
	}
}

// TestTwoBridges: two bridge instances share the state; only the leader
// republishes, and when it goes away the other takes over without
// re-publishing.
func TestTwoBridges(t *testing.T) {
	h := newHarness(t, 2, 4)
	first := h.bridge
	firstSrv := h.srv
	h.startBridge()
	second := h.bridge
	waitFor(t, "one leader", func() bool { return first.IsLeader() != second.IsLeader() })
	h.produce(4, seq(0, 50)...)
	// Register and trigger through the follower.
	follower, leader := second, first
	if second.IsLeader() {
		follower, leader = first, second
	}
	_ = firstSrv
	srv := h.srv
	if follower == first {
		srv = firstSrv
	}
	var dt struct{ Topic string }
	httpGetJSON(t, srv.URL+"/fluid/downgrade-topic?topic="+h.topic+"&group="+h.g("g")+"&compatible-schema-version=3", &dt)
	var cp struct{ Compatible bool }
	httpGetJSON(t, srv.URL+"/fluid/compatible?topic="+h.topic+"&observed-schema-version=4&compatible-schema-version=3", &cp)
	waitFor(t, "50 republished", func() bool { return len(readAll(t, h.prod, dt.Topic)) >= 50 })
	for _, st := range []Status{follower.Status()} {
		for _, r := range st.Republishing {
			if r.Running {
				t.Fatal("the follower republishes too")
			}
		}
	}
	// The leader goes away; the follower takes over.
	testenv.Close(t, context.Background(), leader)
	waitFor(t, "follower to lead", follower.IsLeader)
	h.produce(4, seq(50, 80)...)
	waitFor(t, "80 republished", func() bool { return len(readAll(t, h.prod, dt.Topic)) >= 80 })
	time.Sleep(300 * time.Millisecond)
	recs := readAll(t, h.prod, dt.Topic)
	if len(recs) != 80 {
		t.Fatalf("downgrade topic has %d records, want 80 (no duplicates)", len(recs))
	}
	_ = kgo.Record{}
}

// TestStatusAfterRestart: after a bridge restart /fluid/status
// must show where republishing really is (the position after the last
// record of each downgrade partition), not the last progress the previous
// instance happened to record.
func TestStatusAfterRestart(t *testing.T) {
	h := newHarness(t, 2, 4)
	var dt struct{ Topic string }
	httpGetJSON(t, h.srv.URL+"/fluid/downgrade-topic?topic="+h.topic+"&group="+h.g("g")+"&compatible-schema-version=3", &dt)
	var cp struct{ Compatible bool }
	httpGetJSON(t, h.srv.URL+"/fluid/compatible?topic="+h.topic+"&observed-schema-version=4&compatible-schema-version=3", &cp)
	// Bursts in quick succession: progress is recorded in the state topic
	// at most once a second, so the last bursts are not in it.
	total := 0
	for i := 0; i < 5; i++ {
		h.produce(4, seq(total, total+40)...)
		total += 40
		waitFor(t, "republished", func() bool { return len(readAll(t, h.prod, dt.Topic)) >= total })
	}
	// Where republishing is: after the last downgrade record's source.
	want := map[int32]int64{}
	for _, r := range readAll(t, h.prod, dt.Topic) {
		rec := kgox.Record(r)
		_, so, err := sourcePosition(&rec)
		must(t, err)
		want[r.Partition] = so + 1
	}
	h.srv.Close()
	must(t, h.bridge.Close(context.Background()))
	h.startBridge()
	waitFor(t, "the restarted bridge to republish", func() bool {
		st := h.bridge.Status()
		return st.Leader && len(st.Republishing) == 1 && st.Republishing[0].Running
	})
	waitFor(t, "status to show the resumed positions", func() bool {
		st := h.bridge.Status()
		return len(st.Republishing) == 1 && st.Republishing[0].Next != nil
	})
	st := h.bridge.Status().Republishing[0]
	for p, o := range want {
		if st.Next[p] != o {
			t.Errorf("status after restart: next %v, but republishing resumed at %v", st.Next, want)
			break
		}
	}
}

func FuzzCompatParams(f *testing.F) {
	for _, s := range []string{"topic=orders&observed-schema-version=4&compatible-schema-version=3",
		"topic=a%2Bb&topic=x&observed-schema-version=+4", "%zz=1&topic=%zz", "&&=&topic", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := parseCompatParams(raw)
		q, err := url.ParseQuery(raw)
		if err != nil {
			return // url.ParseQuery rejects what the fast parser tolerates
		}
		if got.dup != "" && len(q[got.dup]) < 2 {
			t.Fatalf("%q: %s reported repeated, url.ParseQuery has %q", raw, got.dup, q[got.dup])
		}
		for _, k := range []string{"topic", "observed-schema-version", "compatible-schema-version"} {
			if got.dup == "" && len(q[k]) > 1 {
				t.Fatalf("%q: %s repeated (%q) but not reported", raw, k, q[k])
			}
			if got.Get(k) != q.Get(k) {
				t.Fatalf("%q: %s = %q, url.ParseQuery says %q", raw, k, got.Get(k), q.Get(k))
			}
		}
	})
}
