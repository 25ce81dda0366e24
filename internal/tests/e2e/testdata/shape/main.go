// Command shape is a Wasm transform for the reload tests: it sets the
// header "shape" of every record to KIND:TAG, where KIND is the build's
// (go build -ldflags "-X main.kind=b"; "a" by default) and TAG its config's
// {"tag": "..."}, so that a reader of the output sees which file and which
// config wrote each record. Keys, values and other headers are kept.
package main

import (
	"errors"
	"strings"

	"github.com/streamd/streamd/sdk/go/streamd"
)

func main() {}

// kind tells one build of the plugin from another.
var kind = "a"

var shape = []byte(kind + ":")

func init() {
	streamd.OnInit(func(config []byte) error {
		s := string(config)
		i := strings.Index(s, `"tag":"`)
		if i < 0 {
			return errors.New(`want {"tag": "..."}`)
		}
		rest := s[i+len(`"tag":"`):]
		j := strings.IndexByte(rest, '"')
		if j < 0 {
			return errors.New(`want {"tag": "..."}`)
		}
		shape = []byte(kind + ":" + rest[:j])
		return nil
	})
	streamd.Transform(streamd.Manifest{Name: "shape", Version: "1.0.0"},
		func(r *streamd.Record) ([]streamd.Record, error) {
			out := *r
			out.SetHeader("shape", shape)
			return streamd.One(out), nil
		})
}
