package config

import (
	"strings"
	"testing"
)

// TestUnknownKeyInLaterPipeline: a misspelt key in the second or third
// [[pipeline]] is reported at its own line, with the pipeline's index in
// the key path, not at the first pipeline's line.
func TestUnknownKeyInLaterPipeline(t *testing.T) {
	src := `[kafka]
brokers = ["127.0.0.1:9092"]

[[pipeline]]
name = "one"
[pipeline.source]
type = "kafka"
topics = ["a"]
topcis = "x"
[pipeline.sink]
type = "kafka"
topic = "b"

[[pipeline]]
name = "two"
[pipeline.source]
type = "kafka"
topics = ["c"]
[pipeline.sink]
type = "kafka"
topic = "d"

[[pipeline]]
name = "three"
[pipeline.source]
type = "kafka"
topics = ["e"]
topcis = "y"
[pipeline.sink]
type = "kafka"
topic = "f"
`
	_, err := Parse("s.toml", []byte(src), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("no error for two misspelt keys")
	}
	for _, want := range []string{
		`s.toml:9: pipeline[0].source.topcis: unknown key`,
		`s.toml:28: pipeline[2].source.topcis: unknown key`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error\n%v\nwant a line %q", err, want)
		}
	}
}
