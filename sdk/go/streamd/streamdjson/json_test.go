package streamdjson

import (
	"strings"
	"testing"

	"github.com/streamd/streamd/sdk/go/streamd"
)

type testConfig struct {
	Field string `json:"field"`
	Limit int    `json:"limit"`
}

func TestDecode(t *testing.T) {
	var c testConfig
	if err := Decode([]byte(`{"field":"a","limit":3}`), &c); err != nil || c != (testConfig{"a", 3}) {
		t.Fatalf("%+v %v", c, err)
	}
	for in, want := range map[string]string{
		`{"feild":"a"}`:   `unknown field "feild"`,
		`{"limit":"3"}`:   "cannot unmarshal string",
		`{"field":"a"} x`: "data after the JSON document",
	} {
		if err := Decode([]byte(in), &c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%s): %v, want %q", in, err, want)
		}
	}
}

func TestEncode(t *testing.T) {
	b, err := Encode([]byte("x="), map[string]any{"a": "<b>", "n": 1})
	if err != nil || string(b) != `x={"a":"<b>","n":1}` {
		t.Fatalf("%s %v", b, err)
	}
}

// TestConfig: the registered init decodes into the defaults and refuses
// unknown keys, through the SDK's streamd_init path.
func TestConfig(t *testing.T) {
	var got testConfig
	streamd.Transform(streamd.Manifest{Name: "cfg", Version: "1.0.0"}, func(r *streamd.Record) ([]streamd.Record, error) { return nil, nil })
	Config(func(c testConfig) error { got = c; return nil }, testConfig{Field: "default", Limit: 10})
	if status, reply := streamd.Init([]byte(`{"limit":5}`)); status != streamd.StatusOK || got != (testConfig{"default", 5}) {
		t.Fatalf("init: %d %s, config %+v", status, reply, got)
	}
	if status, reply := streamd.Init([]byte(`{"limt":5}`)); status != streamd.StatusConfig || !strings.Contains(string(reply), `config: json: unknown field "limt"`) {
		t.Fatalf("init with a misspelt key: %d %s", status, reply)
	}
}
