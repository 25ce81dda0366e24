package plugins_test

import (
	"context"
	"errors"
	"testing"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// The func adapters are the interfaces they stand beside: a value passes
// where a Transformer or Sink is wanted, and the call reaches the function.
func TestFuncAdapters(t *testing.T) {
	ctx := context.Background()
	batch := []record.Record{{Value: []byte("a")}, {Value: []byte("b")}}
	var tr plugins.Transformer = plugins.TransformerFunc(func(_ context.Context, in []record.Record) ([]plugins.Result, error) {
		out := make([]plugins.Result, len(in))
		for i, r := range in {
			out[i].Records = []record.Record{{Value: append([]byte("x"), r.Value...)}}
		}
		return out, nil
	})
	res, err := tr.Transform(ctx, batch)
	if err != nil || len(res) != 2 || string(res[1].Records[0].Value) != "xb" {
		t.Fatalf("Transform = %+v, %v", res, err)
	}
	bad := errors.New("not durable")
	var s plugins.Sink = plugins.SinkFunc(func(_ context.Context, in []record.Record) ([]error, error) {
		return []error{nil, bad}, nil
	})
	errs, err := s.Write(ctx, batch)
	if err != nil || len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], bad) {
		t.Fatalf("Write = %v, %v", errs, err)
	}
}
