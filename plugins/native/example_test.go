package native_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/native"
	"github.com/streamd/streamd/record"
)

// Open a native transform, send it a batch, and stop it.
func ExampleOpen() {
	ctx := context.Background()
	p, err := native.Open(ctx, "./examples/native/go/orders-downgrade/plugin", plugins.Options{
		Kind:   plugins.KindTransform,
		Logger: slog.Default(),
		Native: plugins.NativeOptions{ShutdownTimeout: 2 * time.Second},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := p.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	res, err := p.(plugins.Transformer).Transform(ctx, []record.Record{{Value: []byte(`{"order_id":"o1","customer":{"id":"c1"},"amount_cents":5,"currency":"EUR"}`)}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", res[0].Records[0].Value)
	if err := p.(interface{ Health() error }).Health(); err != nil {
		log.Fatal(err)
	}
}
