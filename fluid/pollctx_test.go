package fluid

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestPollContextEndsDuringSwitch: a Poll whose context ends while a
// partition switches to the downgrade topic (the bridge answers slowly)
// returns what it has and no error, as when the context ends during the
// fetch, and the next Poll goes on from the record it could not handle: no
// record is lost or repeated. Before, Poll returned the context's error
// ("fluid consumer: ... context deadline exceeded"), which a caller that
// polls with a short timeout takes for a failure (a trial CI run of
// TestRebalanceMidway, load ~5).
func TestPollContextEndsDuringSwitch(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.produce(1, seq(0, 10)...)
	h.produce(2, seq(10, 20)...)
	// The bridge's first answers to downgrade-offset come after 1 s, longer
	// than a Poll's context.
	target, err := url.Parse(h.srv.URL)
	must(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var slow atomic.Int32
	slow.Store(2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/fluid/downgrade-offset") && slow.Add(-1) >= 0 {
			time.Sleep(time.Second)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := NewConsumer(ctx, ConsumerConfig{BridgeURL: srv.URL, Topic: h.topic, Group: h.g("g"), CompatibleVersion: 1,
		KafkaOptions: []kgo.Opt{kgo.SeedBrokers(h.broker.Seeds...)}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	must(t, err)
	testenv.CloseAtEnd(t, c)
	s := h.seen(1)
	for deadline := time.Now().Add(60 * time.Second); len(s.ids) < 20; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 20 records in 60 s", len(s.ids))
		}
		pctx, pcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		rs, err := c.Poll(pctx)
		pcancel()
		if err != nil {
			t.Fatalf("Poll with a context that ended during a switch: %v", err)
		}
		for _, r := range rs {
			s.add(r)
		}
		c.Ack(rs)
	}
	if slow.Load() >= 0 {
		t.Fatal("no Poll met a slow downgrade-offset answer: the test proves nothing")
	}
	s.exactlyAll(0, 20)
}
