package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// reverse answers input i with the input batch[n-1-i] itself, an element of
// the array it was given: a Transformer may do that, and the pipeline,
// which writes one-to-one outputs over its input array, must not change a
// record a later result still points at.
type reverse struct{}

func (reverse) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i := range batch {
		j := len(batch) - 1 - i
		out[i].Records = batch[j : j+1]
	}
	return out, nil
}

// keepOrUpper answers KEEP (the input itself) for even offsets and an
// uppercased copy for odd ones, as a Wasm stage does.
type keepOrUpper struct{}

func (keepOrUpper) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i := range batch {
		if batch[i].Offset%2 == 0 {
			out[i].Records = batch[i : i+1]
			continue
		}
		r := batch[i]
		r.Value = []byte(strings.ToUpper(string(r.Value)))
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

// rejectOffset rejects the records at one offset.
type rejectOffset int64

func (o rejectOffset) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i := range batch {
		if batch[i].Offset == int64(o) {
			out[i].Err = errors.New("rejected")
			continue
		}
		out[i].Records = batch[i : i+1]
	}
	return out, nil
}

// TestOneToOneStages: stages that answer one record per input (KEEP, a
// changed copy, or another input of the batch) give every input's output
// exactly once, and a later stage's rejection still finds its input.
func TestOneToOneStages(t *testing.T) {
	const parts, per = 2, 300
	for _, tc := range []struct {
		name   string
		stages []pipeline.Stage
		want   func(part int32, o int) (string, bool)
	}{
		{"reverse", []pipeline.Stage{{Name: "rev", Transformer: reverse{}}}, func(p int32, o int) (string, bool) {
			return fmt.Sprintf("v%d-%d", p, o), true
		}},
		{"keep or upper, then reverse", []pipeline.Stage{{Name: "ku", Transformer: keepOrUpper{}}, {Name: "rev", Transformer: reverse{}}}, func(p int32, o int) (string, bool) {
			v := fmt.Sprintf("v%d-%d", p, o)
			if o%2 == 1 {
				v = strings.ToUpper(v)
			}
			return v, true
		}},
		{"keep or upper, then a rejection", []pipeline.Stage{{Name: "ku", Transformer: keepOrUpper{}}, {Name: "rej", Transformer: rejectOffset(7)}}, func(p int32, o int) (string, bool) {
			v := fmt.Sprintf("v%d-%d", p, o)
			if o%2 == 1 {
				v = strings.ToUpper(v)
			}
			return v, o != 7
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := pipelinetest.NewSource(parts, per, 64)
			sink, dlq := &pipelinetest.Sink{}, &pipelinetest.Sink{}
			p := pipeline.New("t", src, sink, append(fast(), pipeline.WithStages(tc.stages...), pipeline.WithErrorPolicy(pipeline.PolicyDLQ, dlq))...)
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			var got, want, dead, wantDead []string
			for _, r := range sink.Records() {
				got = append(got, string(r.Value))
			}
			for _, r := range dlq.Records() {
				dead = append(dead, string(r.Value))
			}
			for part := int32(0); part < parts; part++ {
				for o := range per {
					if v, ok := tc.want(part, o); ok {
						want = append(want, v)
					} else {
						wantDead = append(wantDead, fmt.Sprintf("v%d-%d", part, o)) // the input, as read
					}
				}
			}
			slices.Sort(dead)
			if !slices.Equal(dead, wantDead) {
				t.Fatalf("dead letters %q, want %q", dead, wantDead)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%d records written, want %d; first difference: %s", len(got), len(want), firstDiff(got, want))
			}
			if n := src.AckedN(); n != parts*per {
				t.Fatalf("%d acknowledged, want %d", n, parts*per)
			}
		})
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("%q, want %q", got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}
