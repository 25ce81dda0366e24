package plugincli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"testing"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

var update = flag.Bool("update", false, "rewrite examples/wasm/testdata/orders-v1.expected.jsonl")

const (
	fixtureIn       = "../../../examples/wasm/testdata/orders-v2.jsonl"
	fixtureExpected = "../../../examples/wasm/testdata/orders-v1.expected.jsonl"
)

// nativeDowngrade is the orders downgrade as an in-process transform.
type nativeDowngrade struct{}

func (nativeDowngrade) Manifest() plugins.Manifest {
	return plugins.Manifest{Name: "orders-downgrade", Kind: plugins.KindTransform, Version: "1.0.0", ABI: 1}
}
func (nativeDowngrade) Close(context.Context) error { return nil }
func (nativeDowngrade) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	res := make([]plugins.Result, len(batch))
	for i := range batch {
		v, err := downgrade.Value(nil, batch[i].Value)
		if err != nil {
			res[i].Err = err
			continue
		}
		out := batch[i].Clone()
		out.Value = v
		out.SetHeader(downgrade.SchemaHeader, []byte("1"))
		res[i].Records = []record.Record{out}
	}
	return res, nil
}

// TestFixture checks the expected output of the conformance fixture against
// the Go downgrade, run through the same code as `streamd plugin run`.
func TestFixture(t *testing.T) {
	recs, err := readRecords(fixtureIn)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := Run(context.Background(), nativeDowngrade{}, RunOptions{Batch: 7}, recs, &got); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(fixtureExpected, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(fixtureExpected)
	if err != nil {
		t.Fatal(err)
	}
	diff, err := Compare(got.Bytes(), want)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Fatal(diff)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("output is equivalent but not byte-identical to %s", fixtureExpected)
	}
}
