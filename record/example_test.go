package record_test

import (
	"fmt"
	"strings"

	"github.com/streamd/streamd/record"
)

func ExampleAppendJSON() {
	r := record.Record{Key: []byte("o-1"), Value: []byte(`{"a":1}`), Partition: 2, Offset: 7}
	r.SetHeader("fluid-schema-version", []byte("1"))
	fmt.Println(string(record.AppendJSON(nil, &r)))
	// Output:
	// {"key":"o-1","value":"{\"a\":1}","headers":{"fluid-schema-version":"1"},"partition":2,"offset":7}
}

func ExampleReader() {
	in := `{"key":"a","value":"1"}
{"key":"b","value_b64":"/w=="}
`
	r := record.NewReader(strings.NewReader(in), "in.jsonl")
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		fmt.Printf("line %d: %s %q\n", r.Line(), rec.Key, rec.Value)
	}
	// Output:
	// line 1: a "1"
	// line 2: b "\xff"
}
