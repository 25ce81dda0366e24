package wasm_test

import (
	"context"
	"fmt"
	"log"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
	"github.com/streamd/streamd/record"
)

// Open a Wasm transform and run a batch through it.
func ExampleOpen() {
	ctx := context.Background()
	p, err := wasm.Open(ctx, "../../examples/wasm/go/orders-downgrade/plugin.wasm", plugins.Options{
		Kind: plugins.KindTransform,
		// e.g. /var/cache/streamd/wasm,
		Wasm: plugins.WasmOptions{CacheDir: ""},
	})
	if err != nil {
		log.Fatal(err) // build it first: examples/wasm/go/orders-downgrade/build.sh
	}
	defer func() {
		if err := p.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	res, err := p.(plugins.Transformer).Transform(ctx, []record.Record{
		{Value: []byte(`{"order_id":"o-1","customer":{"id":"c-1"},"amount_cents":1999,"currency":"EUR"}`)},
		{Value: []byte(`{"order_id":1}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", res[0].Records[0].Value)
	fmt.Println(res[1].Err)
}
