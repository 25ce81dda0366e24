package plugins_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// A built-in transform needs no plugin file: a TransformerFunc is a
// plugins.Transformer, and goes wherever a loaded plugin's would.
func ExampleTransformerFunc() {
	upper := plugins.TransformerFunc(func(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
		out := make([]plugins.Result, len(batch))
		for i, r := range batch {
			r.Value = []byte(strings.ToUpper(string(r.Value)))
			out[i].Records = []record.Record{r}
		}
		return out, nil
	})
	res, _ := upper.Transform(context.Background(), []record.Record{{Value: []byte("hello")}})
	fmt.Println(string(res[0].Records[0].Value))
	// Output: HELLO
}
