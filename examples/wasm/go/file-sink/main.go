// Command file-sink is a streamd Wasm sink plugin written with the Go SDK:
// it appends each record's value, one per line, to a file in a directory
// the host grants (config {"path": "/out/records.txt"}) and syncs it before
// acknowledging. A value containing a newline is rejected. Build it with
// build.sh.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/streamd/streamd/sdk/go/streamd"
)

func main() {}

var out *os.File

func init() {
	streamd.OnInit(func(config []byte) error {
		var c struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(config, &c); err != nil {
			return err
		}
		if c.Path == "" {
			return errors.New("config: path is required")
		}
		f, err := os.OpenFile(c.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open %s: %w", c.Path, err)
		}
		out = f
		return nil
	})
	streamd.Sink(streamd.Manifest{Name: "file-sink", Version: "1.0.0"},
		func(r *streamd.Record) error {
			if bytes.IndexByte(r.Value, '\n') >= 0 {
				return errors.New("value contains a newline")
			}
			if _, err := out.Write(append(r.Value, '\n')); err != nil {
				return streamd.BatchError(err)
			}
			if err := out.Sync(); err != nil {
				return streamd.BatchError(err)
			}
			return nil
		})
}
