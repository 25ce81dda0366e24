package codecs_test

import (
	"context"
	"fmt"
	"log"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/codecs"
)

func ExampleNew() {
	ctx := context.Background()
	c, err := codecs.New("zstd", 0)
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := c.(plugins.Plugin).Close(ctx); err != nil {
			log.Print(err)
		}
	}()

	enc, err := c.Encode(ctx, [][]byte{[]byte(`{"id":1}`), nil})
	if err != nil {
		panic(err)
	}
	// A corrupt payload fails alone; the batch goes on.
	dec, err := c.Decode(ctx, [][]byte{enc[0].Data, enc[1].Data, []byte("not zstd")})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", dec[0].Data)
	fmt.Println(dec[1].Data == nil)
	fmt.Println(dec[2].Err != nil)

	_, err = codecs.New("brotli", 0)
	fmt.Println(err)
	// Output:
	// {"id":1}
	// true
	// true
	// codecs: unknown codec "brotli" (valid: gzip, lz4, snappy, zstd)
}
