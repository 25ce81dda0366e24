package fluid_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/fluid"
)

func ExampleLoadMetadata() {
	m, err := fluid.LoadMetadata("testdata/example")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("versions", m.First(), "to", m.Last(), m.Topics())
	// customers only changed an annotation (title): still compatible.
	ok, _ := m.Compatible("customers", 2, 1)
	fmt.Println("customers v2 readable as v1:", ok)
	ok, _ = m.Compatible("orders", 2, 1)
	fmt.Println("orders v2 readable as v1:", ok)
	steps, _ := m.Chain("orders", 2, 1)
	fmt.Println("steps:", len(steps))
	// Check without loading plugins reports no problem.
	fmt.Println("problems:", len(m.Check(context.Background(), nil)))
	// Output:
	// versions 1 to 2 [customers orders]
	// customers v2 readable as v1: true
	// orders v2 readable as v1: false
	// steps: 1
	// problems: 0
}

// A bridge served on an HTTP address. In streamd it is mounted on the admin
// address by [fluid] in the config.
func ExampleNewBridge() {
	ctx := context.Background()
	b, err := fluid.NewBridge(ctx,
		fluid.WithMetadataDir(".fluid"),
		fluid.WithBrokers("127.0.0.1:9092"),
		// fluid.WithLoader(load.Open) to run Wasm or native downgrades.
	)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := b.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	log.Fatal(http.ListenAndServe("127.0.0.1:9644", b.Handler()))
}

// An application on version 3 of the orders topic.
func ExampleConsumer() {
	ctx := context.Background()
	c, err := fluid.NewConsumer(ctx, fluid.ConsumerConfig{
		BridgeURL:         "http://127.0.0.1:9644",
		Topic:             "orders",
		Group:             "billing",
		CompatibleVersion: 3,
		KafkaOptions:      []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	for {
		rs, err := c.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range rs {
			fmt.Printf("%s\n", r.Value) // never newer than v3
		}
		c.Ack(rs)
		if err := c.Commit(ctx); err != nil {
			log.Fatal(err)
		}
	}
}
