package pipeline_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/pipelinetest"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// shout is an in-process transform: it uppercases each value.
type shout struct{}

func (shout) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	for i, r := range batch {
		r.Value = []byte(strings.ToUpper(string(r.Value)))
		out[i].Records = []record.Record{r}
	}
	return out, nil
}

// printSink prints each record's key and value.
type printSink struct{}

func (printSink) Write(_ context.Context, batch []record.Record) ([]error, error) {
	for _, r := range batch {
		fmt.Printf("%s %s\n", r.Key, r.Value)
	}
	return make([]error, len(batch)), nil
}

// A pipeline from a finite source through one stage to a sink. Run returns
// when the source ends and every record was written.
func Example() {
	src := pipelinetest.NewSourceOf(10, // a source of two records held in memory
		record.Record{Key: []byte("k1"), Value: []byte("hello")},
		record.Record{Key: []byte("k2"), Value: []byte("world")})
	p := pipeline.New("example", src, printSink{},
		pipeline.WithStages(pipeline.Stage{Name: "shout", Transformer: shout{}}),
		pipeline.WithWorkers(1))
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println(p.Status().State, p.Status().Out)
	// Output:
	// k1 HELLO
	// k2 WORLD
	// done 2
}
