// Command demo shows Fluid Messaging end to end: a publisher that has moved
// to orders v3 and a consumer still built for orders v1, which reads every
// order, in order, as v1, through the Wasm downgrades v3 -> v2 -> v1.
//
//	go run ./examples/fluid/demo                   # in-process broker and bridge
//	go run ./examples/fluid/demo -brokers 127.0.0.1:29192 -bridge http://127.0.0.1:29644
//
// The second form talks to a running `streamd run -c examples/fluid/streamd.toml`.
// Build the Wasm downgrades first: examples/fluid/build.sh.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
)

func main() {
	brokers := flag.String("brokers", "", "Kafka brokers (empty: an in-process broker)")
	bridge := flag.String("bridge", "", "bridge base URL (empty: an in-process bridge)")
	meta := flag.String("metadata", "", "fluid metadata dir (default: .fluid next to this demo)")
	topic := flag.String("topic", "orders", "topic")
	flag.Parse()
	if *meta == "" {
		*meta = filepath.Join(demoDir(), ".fluid")
	}
	log.SetFlags(0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	seeds := strings.Split(*brokers, ",")
	if *brokers == "" {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		seeds = c.ListenAddrs()
		fmt.Println("broker:  in-process at", seeds[0])
	}
	if *bridge == "" {
		b, err := fluid.NewBridge(ctx, fluid.WithMetadataDir(*meta), fluid.WithBrokers(seeds...),
			fluid.WithLoader(wasmLoader), fluid.WithLogger(quiet))
		if err != nil {
			log.Fatal(err)
		}
		defer func() { _ = b.Close(context.Background()) }()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		go func() { _ = http.Serve(ln, b.Handler()) }()
		*bridge = "http://" + ln.Addr().String()
		fmt.Println("bridge:  in-process at", *bridge, "metadata", *meta)
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(*topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		log.Fatal(err)
	}
	defer prod.Close()
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, 2, 1, nil, *topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		log.Fatal(err)
	}

	// The old publisher wrote v1 orders...
	publish(ctx, prod, 1, 0, 3)
	// ...and the legacy consumer, built for v1, starts.
	c, err := fluid.NewConsumer(ctx, fluid.ConsumerConfig{BridgeURL: *bridge, Topic: *topic, Group: "legacy-billing",
		CompatibleVersion: 1, KafkaOptions: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	fmt.Println("consumer: group legacy-billing on v1, downgrade topic", c.DowngradeTopic())
	md, err := fluid.LoadMetadata(*meta)
	if err != nil {
		log.Fatal(err)
	}
	v1, err := md.Topic(*topic, 1)
	if err != nil {
		log.Fatal(err)
	}
	got := read(ctx, c, v1, 3)
	// The publisher is upgraded to v3 and keeps writing.
	publish(ctx, prod, 3, 3, 10)
	got += read(ctx, c, v1, 7)
	fmt.Printf("\nthe v1 consumer read %d orders, every one valid v1; it switched to %s: %v\n", got, c.DowngradeTopic(), c.Downgraded())
}

func demoDir() string {
	for _, d := range []string{"examples/fluid", "."} {
		if _, err := os.Stat(filepath.Join(d, ".fluid")); err == nil {
			return d
		}
	}
	return "."
}

// wasmLoader loads "wasm:PATH" downgrades (streamd uses plugins/load).
func wasmLoader(ctx context.Context, ref string, opts plugins.Options) (plugins.Plugin, error) {
	return wasm.Open(ctx, strings.TrimPrefix(ref, "wasm:"), opts)
}

func publish(ctx context.Context, cl *kgo.Client, version, from, to int) {
	for i := from; i < to; i++ {
		var v any
		id, cust := "o-"+strconv.Itoa(i), "c-"+strconv.Itoa(i%3)
		switch version {
		case 1:
			v = map[string]any{"order_id": id, "customer_id": cust, "amount_cents": 1000 + i, "currency": "EUR"}
		case 3:
			v = map[string]any{"order_id": id, "customer": map[string]any{"id": cust, "name": "Ada"},
				"total": map[string]any{"amount_cents": 1000 + i, "currency": "EUR"}, "status": "paid"}
		}
		b, _ := json.Marshal(v)
		r := &kgo.Record{Key: []byte(cust), Value: b, Headers: []kgo.RecordHeader{{Key: fluid.HeaderSchemaVersion, Value: []byte(strconv.Itoa(version))}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("publish  v%d %s\n", version, b)
	}
}

// read polls n records and checks each against the v1 schema.
func read(ctx context.Context, c *fluid.Consumer, v1 *fluid.TopicVersion, n int) int {
	got := 0
	for got < n {
		rs, err := c.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if ctx.Err() != nil {
			log.Fatal("timed out")
		}
		for _, r := range rs {
			v, _ := r.Header(fluid.HeaderSchemaVersion)
			from := ""
			if so, ok := r.Header(fluid.HeaderSourceOffset); ok {
				sv, _ := r.Header(fluid.HeaderSourceVersion)
				from = fmt.Sprintf("  (downgraded from v%s, %s/%d@%s)", sv, strings.TrimSuffix(r.Topic, fluid.DefaultTopicSuffix+"1"), r.Partition, so)
			}
			fmt.Printf("consume  v%s %s%s\n", v, r.Value, from)
			if err := v1.Validate(r.Value); err != nil {
				log.Fatalf("not a valid v1 order: %v", err)
			}
		}
		got += len(rs)
		c.Ack(rs)
		if err := c.Commit(ctx); err != nil {
			log.Fatal(err)
		}
	}
	return got
}
