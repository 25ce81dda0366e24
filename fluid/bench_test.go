package fluid

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	pkafka "github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// The republishing benchmark and its baseline run the same Go orders
// downgrade (examples/wasm/go/orders-downgrade, Wasm) over the same v2
// records on the same in-process broker:
//
//	BenchmarkRepublish   the bridge republishing orders (v2) for a v1 group
//	BenchmarkPipeline    a plain streamd pipeline: Kafka source -> the same
//	                     Wasm transform -> Kafka sink (same partition)
//
// Run with a fixed record count, e.g.
//
//	go test -run '^$' -bench 'Republish|Pipeline' -benchtime 20000x ./fluid/

var benchWasm struct {
	once sync.Once
	dir  string
	err  error
}

// benchMetadata is examples/fluid/.fluid v1 and v2, with the v2 -> v1
// downgrade built into a temp dir once per process.
func benchMetadata(b *testing.B) (*Metadata, string) {
	benchWasm.once.Do(func() {
		benchWasm.dir, benchWasm.err = os.MkdirTemp("", "fluid-bench")
		if benchWasm.err != nil {
			return
		}
		out := filepath.Join(benchWasm.dir, "v2-v1.wasm")
		cmd := fmt.Sprintf("GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o %s ../examples/wasm/go/orders-downgrade", out)
		benchWasm.err = runShell(cmd)
		if benchWasm.err != nil {
			return
		}
		for _, v := range []string{"v1", "v2"} {
			d := filepath.Join(benchWasm.dir, "meta", v)
			if benchWasm.err = os.MkdirAll(d, 0o755); benchWasm.err != nil {
				return
			}
			for _, f := range []string{ManifestFile, "orders.schema.json"} {
				raw, err := os.ReadFile(filepath.Join("../examples/fluid/.fluid", v, f))
				if err != nil {
					benchWasm.err = err
					return
				}
				s := strings.Replace(string(raw), "wasm:../../../wasm/go/orders-downgrade/plugin.wasm", "wasm:"+out, 1)
				if benchWasm.err = os.WriteFile(filepath.Join(d, f), []byte(s), 0o644); benchWasm.err != nil {
					return
				}
			}
		}
	})
	if benchWasm.err != nil {
		b.Fatal(benchWasm.err)
	}
	m, err := LoadMetadata(filepath.Join(benchWasm.dir, "meta"))
	if err != nil {
		b.Fatal(err)
	}
	return m, filepath.Join(benchWasm.dir, "v2-v1.wasm")
}

func benchOrders(b *testing.B, broker *testenv.Broker, topic string, n int) {
	b.Helper()
	cl := broker.Client(b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		v := fmt.Sprintf(`{"order_id":"o-%d","customer":{"id":"c-%d","name":"Ada Lovelace"},"amount_cents":%d,"currency":"EUR"}`, i, i%1000, 1000+i)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte("c-" + strconv.Itoa(i%1000)), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: HeaderSchemaVersion, Value: []byte("2")}}}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// waitRecords waits until topic holds n records.
func waitRecords(b *testing.B, adm *kadm.Client, topic string, n int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ends, err := adm.ListEndOffsets(context.Background(), topic)
		if err == nil {
			var sum int64
			ends.Each(func(o kadm.ListedOffset) { sum += max(o.Offset, 0) })
			if sum >= int64(n) {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %d records in %s", n, topic)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func BenchmarkRepublish(b *testing.B) {
	m, _ := benchMetadata(b)
	broker := testenv.Kafka(b)
	topic := "orders"
	if broker.Real {
		topic = testenv.Topic(b, "orders")
		m = m.renameTopic("orders", topic)
	}
	broker.CreateTopic(b, topic, 4)
	benchOrders(b, broker, topic, b.N)
	batch := 256
	if s := os.Getenv("FLUID_BENCH_BATCH"); s != "" {
		batch, _ = strconv.Atoi(s)
	}
	br, err := NewBridge(context.Background(), WithMetadata(m), WithLoader(wasmLoader), WithBrokers(broker.Seeds...), WithBatchSize(batch),
		WithStateTopic(testenv.Topic(b, "state")), WithLeaderGroup(testenv.Topic(b, "leader")), WithLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer testenv.Close(b, context.Background(), br)
	srv := httptest.NewServer(br.Handler())
	defer srv.Close()
	get := func(path string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET %s: %v %v", path, err, resp)
		}
		_ = resp.Body.Close()
	}
	get("/fluid/downgrade-topic?topic=" + topic + "&group=g&compatible-schema-version=1")
	// Load the plugin before timing (both benchmarks exclude plugin load).
	tr, err := br.dg.step(context.Background(), Step{Topic: topic, From: 2, TopicVersion: m.versions[2][topic]})
	if err != nil {
		b.Fatal(err)
	}
	warmUp(b, tr)
	waitFor2(b, br.IsLeader)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	get("/fluid/compatible?topic=" + topic + "&observed-schema-version=2&compatible-schema-version=1")
	waitRecords(b, kadm.NewClient(broker.Client(b)), br.DowngradeTopic(topic, 1), b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/record")
}

func BenchmarkPipeline(b *testing.B) {
	_, wasmPath := benchMetadata(b)
	broker := testenv.Kafka(b)
	topic, out := testenv.Topic(b, "orders"), testenv.Topic(b, "orders-out")
	broker.CreateTopic(b, topic, 4)
	broker.CreateTopic(b, out, 4)
	benchOrders(b, broker, topic, b.N)
	p, err := wasmLoader(context.Background(), "wasm:"+wasmPath, plugins.Options{Kind: plugins.KindTransform})
	if err != nil {
		b.Fatal(err)
	}
	defer testenv.Close(b, context.Background(), p)
	warmUp(b, p.(plugins.Transformer))
	src, err := pkafka.NewSource(pkafka.SourceConfig{Seeds: broker.Seeds, Topics: []string{topic}, Group: testenv.Topic(b, "bench"), Partitions: 4})
	if err != nil {
		b.Fatal(err)
	}
	sink, err := pkafka.NewSink(pkafka.SinkConfig{Seeds: broker.Seeds, Topic: out, SamePartition: true, Partitions: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer testenv.Close(b, context.Background(), sink)
	pl := pipeline.New("bench", src, sink, pipeline.WithStages(pipeline.Stage{Name: "downgrade", Transformer: p.(plugins.Transformer)}),
		pipeline.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	go func() { done <- pl.Run(ctx) }()
	waitRecords(b, kadm.NewClient(broker.Client(b)), out, b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/record")
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCompatible measures GET /fluid/compatible over keep-alive
// connections (a real TCP server on 127.0.0.1, parallel clients).
func BenchmarkCompatible(b *testing.B) {
	m, err := LoadMetadata(writeMetadata(b, 4))
	if err != nil {
		b.Fatal(err)
	}
	broker := testenv.Kafka(b)
	br, err := NewBridge(context.Background(), WithMetadata(m), WithBrokers(broker.Seeds...),
		WithStateTopic(testenv.Topic(b, "state")), WithLeaderGroup(testenv.Topic(b, "leader")), WithLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer testenv.Close(b, context.Background(), br)
	srv := httptest.NewServer(br.Handler())
	defer srv.Close()
	// A group on v3, so the first false answer starts republishing and the
	// rest take the steady-state path.
	broker.CreateTopic(b, "orders", 1)
	resp, err := http.Get(srv.URL + "/fluid/downgrade-topic?topic=orders&group=g&compatible-schema-version=3")
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("register: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	u := srv.URL + "/fluid/compatible?" + url.Values{"topic": {"orders"}, "observed-schema-version": {"4"}, "compatible-schema-version": {"3"}}.Encode()
	b.Run("http.Client", func(b *testing.B) { benchHTTP(b, u, "{\"compatible\":false}\n") })
	b.Run("raw", func(b *testing.B) { benchRaw(b, u, "{\"compatible\":false}\n") })
}

// BenchmarkHTTPBaseline is the same load against a handler that only writes
// the same constant answer: the ceiling net/http and this machine allow.
func BenchmarkHTTPBaseline(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(compatFalse)
	}))
	defer srv.Close()
	u := srv.URL + "/fluid/compatible?topic=orders&observed-schema-version=4&compatible-schema-version=3"
	b.Run("http.Client", func(b *testing.B) { benchHTTP(b, u, "{\"compatible\":false}\n") })
	b.Run("raw", func(b *testing.B) { benchRaw(b, u, "{\"compatible\":false}\n") })
}

// benchRaw is benchHTTP with a minimal HTTP/1.1 client: one keep-alive TCP
// connection per goroutine writing a fixed request and reading the
// response, so less of the CPU goes to the client side.
func benchRaw(b *testing.B, u, want string) {
	pu, err := url.Parse(u)
	if err != nil {
		b.Fatal(err)
	}
	req := []byte("GET " + pu.RequestURI() + " HTTP/1.1\r\nHost: " + pu.Host + "\r\n\r\n")
	b.SetParallelism(4)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		conn, err := net.Dial("tcp", pu.Host)
		if err != nil {
			b.Error(err)
			return
		}
		defer testenv.Ignore(conn.Close)
		br := bufio.NewReader(conn)
		for pb.Next() {
			if _, err := conn.Write(req); err != nil {
				b.Error(err)
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				b.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != want {
				b.Errorf("%d %q", resp.StatusCode, body)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/req")
}

// benchHTTP GETs u from parallel clients over keep-alive connections.
func benchHTTP(b *testing.B, u, want string) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}
	cl := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	b.SetParallelism(4)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := cl.Get(u)
			if err != nil {
				b.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body) // to EOF, so the connection is reused
			_ = resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != want {
				b.Errorf("%d %q", resp.StatusCode, body)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	// CPU used by this process (client and server) per request: what the
	// machine's cores allow when they are not shared.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/req")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err) // RUSAGE_SELF with a valid pointer does not fail
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// warmUp instantiates the plugin's instances (2 on this machine) before
// timing, in both benchmarks.
func warmUp(b *testing.B, tr plugins.Transformer) {
	rec := record.Record{Value: []byte(`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"EUR"}`)}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := tr.Transform(context.Background(), []record.Record{rec}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
}

func waitFor2(b *testing.B, cond func() bool) {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchBatch is 256 orders-v2 records as BenchmarkRepublish writes them.
func benchBatch(n int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		v := fmt.Sprintf(`{"order_id":"o-%d","customer":{"id":"c-%d","name":"Ada Lovelace"},"amount_cents":%d,"currency":"EUR"}`, i, i%1000, 1000+i)
		out[i] = record.Record{Topic: "orders", Partition: 1, Offset: int64(i), Key: []byte("c-" + strconv.Itoa(i%1000)), Value: []byte(v),
			Headers: []record.Header{{Key: HeaderSchemaVersion, Value: []byte("2")}}}
	}
	return out
}

// BenchmarkValidate is the validation of one downgraded (v1) orders record
// against the v1 schema of examples/fluid/.fluid.
func BenchmarkValidate(b *testing.B) {
	m, _ := benchMetadata(b)
	tv, err := m.Topic("orders", 1)
	if err != nil {
		b.Fatal(err)
	}
	v := []byte(`{"order_id":"o-12345","customer_id":"c-345","amount_cents":13345,"currency":"EUR"}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := tv.Validate(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToVersion is the bridge's per-batch work on 256 records (v2 ->
// v1 through the Wasm downgrade, validation, headers), per record.
func BenchmarkToVersion(b *testing.B) {
	m, _ := benchMetadata(b)
	d := newDowngrader(m, wasmLoader, plugins.Options{}, 1)
	defer func() { must(b, d.close(context.Background())) }()
	in := benchBatch(256)
	if _, err := d.toVersion(context.Background(), "orders", 1, in); err != nil {
		b.Fatal(err)
	}
	tr, _ := d.step(context.Background(), Step{Topic: "orders", From: 2})
	b.Run("transform-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tr.Transform(context.Background(), in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/record")
	})
	b.Run("toVersion", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.toVersion(context.Background(), "orders", 1, in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/record")
	})
}
