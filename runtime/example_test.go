package runtime_test

import (
	"context"
	"fmt"
	"log"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
)

// Load a Wasm transform (testdata/identity.wasm is examples/wasm/wat/identity.wat
// built with wat2wasm) and run one batch through it.
func Example() {
	ctx := context.Background()
	h, err := runtime.NewHost(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := h.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	m, err := h.Load(ctx, "testdata/identity.wasm", plugins.Options{Kind: plugins.KindTransform, Pool: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := m.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	fmt.Printf("%+v\n", m.Manifest())

	res, err := m.Call(ctx, runtime.OpTransform, []record.Record{
		{Key: []byte("k1"), Value: []byte("hello")},
		{Key: []byte("k2"), Value: []byte("world")},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		fmt.Printf("%s=%s\n", r.Records[0].Key, r.Records[0].Value)
	}
	// Output:
	// {Name:identity Kind:transform Version:1.0.0 ABI:1}
	// k1=hello
	// k2=world
}
