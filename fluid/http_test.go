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

	"github.com/streamd/streamd/internal/testenv"
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
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, h.srv.URL+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		var e apiError
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tt.code || e.Parameter != tt.param || e.Error == "" {
			t.Errorf("%s %s: %d %+v, want %d naming %q", tt.method, tt.path, resp.StatusCode, e, tt.code, tt.param)
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
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("DELETE with an active member: %d, want 409", resp.StatusCode)
	}
	c.Close()
	resp, err = http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
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
	leader.Close(context.Background())
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
		for _, k := range []string{"topic", "observed-schema-version", "compatible-schema-version"} {
			if got.Get(k) != q.Get(k) {
				t.Fatalf("%q: %s = %q, url.ParseQuery says %q", raw, k, got.Get(k), q.Get(k))
			}
		}
	})
}
