package fluidsource_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/fluid/fluidsource"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// collect is a sink that keeps what it is given.
type collect struct {
	mu   sync.Mutex
	recs []record.Record
}

func (c *collect) Write(_ context.Context, batch []record.Record) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range batch {
		c.recs = append(c.recs, r.Clone())
	}
	return make([]error, len(batch)), nil
}

func (c *collect) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

var _ plugins.Sink = (*collect)(nil)

// dropCurrency is an in-process orders v2 -> v1 downgrade.
type dropCurrency struct{}

func (dropCurrency) Manifest() plugins.Manifest {
	return plugins.Manifest{Name: "drop-currency", Kind: plugins.KindTransform}
}
func (dropCurrency) Close(context.Context) error { return nil }
func (dropCurrency) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		var m map[string]any
		if err := json.Unmarshal(r.Value, &m); err != nil {
			out[i].Err = err
			continue
		}
		delete(m, "currency")
		r.Value, _ = json.Marshal(m)
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

func loader(_ context.Context, ref string, _ plugins.Options) (plugins.Plugin, error) {
	return dropCurrency{}, nil
}

// TestPipelineIsAFluidConsumer runs a pipeline on v1 of fluid/testdata/example:
// customers v2 records are compatible (only an annotation changed) and read
// from the main topic; orders v2 records are not, and the pipeline gets
// them downgraded from the downgrade topic.
func TestPipelineIsAFluidConsumer(t *testing.T) {
	for _, tt := range []struct {
		topic      string
		downgraded bool
	}{{"customers", false}, {"orders", true}} {
		t.Run(tt.topic, func(t *testing.T) { testPipeline(t, tt.topic, tt.downgraded, nil) })
	}
}

// TestPipelineBridgeUnavailable: while the bridge answers /fluid/compatible
// with 503 (what it answers while its Schema Registry cannot), the
// pipeline waits and asks again, and when the bridge answers it reads
// everything: the pipeline does not fail (it failed with "source: fluid
// bridge: ... 503 Service Unavailable" before).
func TestPipelineBridgeUnavailable(t *testing.T) {
	var down atomic.Bool
	var refused atomic.Int32
	down.Store(true)
	wrap := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/fluid/compatible" && down.Load() {
				if refused.Add(1) == 3 {
					down.Store(false) // after three refusals (backoff 100, 200 ms)
				}
				http.Error(w, `{"error":"schema registry: connection refused"}`, http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	testPipeline(t, "orders", true, wrap)
	if refused.Load() < 3 {
		t.Fatalf("the bridge refused %d times, want 3", refused.Load())
	}
}

func testPipeline(t *testing.T, topic string, downgraded bool, wrap func(http.Handler) http.Handler) {
	broker := testenv.Kafka(t)
	// A copy of the example metadata with a topic name unique to this test
	// (a real broker is shared).
	base := topic
	topic = testenv.Topic(t, base)
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		if err := os.MkdirAll(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"manifest.json", "orders.json", "customers.json"} {
			b, err := os.ReadFile(filepath.Join("../testdata/example", v, f))
			if err != nil {
				t.Fatal(err)
			}
			if f == "manifest.json" {
				b = []byte(strings.Replace(string(b), `"`+base+`"`, `"`+topic+`"`, 1))
			}
			if err := os.WriteFile(filepath.Join(dir, v, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	broker.CreateTopic(t, topic, 2)
	meta, err := fluid.LoadMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fluid.NewBridge(context.Background(), fluid.WithMetadata(meta), fluid.WithBrokers(broker.Seeds...), fluid.WithLoader(loader),
		fluid.WithStateTopic(testenv.Topic(t, "state")), fluid.WithLeaderGroup(testenv.Topic(t, "leader")))
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), b)
	h := b.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	prod := broker.Client(t, kgo.DefaultProduceTopic(topic))
	const n = 40
	for i := range n {
		v := "1"
		m := map[string]any{"id": "c-" + strconv.Itoa(i), "order_id": "o-" + strconv.Itoa(i), "amount_cents": i}
		if i >= n/2 {
			v = "2"
			m["currency"] = "EUR"
		}
		val, _ := json.Marshal(m)
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: val,
			Headers: []kgo.RecordHeader{{Key: fluid.HeaderSchemaVersion, Value: []byte(v)}}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	src, err := fluidsource.New(context.Background(), fluid.ConsumerConfig{BridgeURL: srv.URL, Topic: topic, Group: testenv.Topic(t, "group"),
		CompatibleVersion: 1, KafkaOptions: []kgo.Opt{kgo.SeedBrokers(broker.Seeds...)}})
	if err != nil {
		t.Fatal(err)
	}
	sink := &collect{}
	pl := pipeline.New("fluid", src, sink, pipeline.WithCommitInterval(10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for sink.len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("pipeline wrote %d of %d", sink.len(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if src.Consumer().Downgraded() != downgraded {
		t.Fatalf("downgraded = %v, want %v", src.Consumer().Downgraded(), downgraded)
	}
	seen := map[string]bool{}
	for _, r := range sink.recs {
		seen[string(r.Key)] = true
		if base == "orders" {
			var m map[string]any
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Fatalf("%s: %v", r.Value, err)
			}
			if _, ok := m["currency"]; ok {
				t.Fatalf("v1 pipeline got a v2 order: %s", r.Value)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct records, want %d", len(seen), n)
	}
}
