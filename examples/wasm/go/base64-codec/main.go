// Command base64-codec is a streamd Wasm codec plugin written with the Go
// SDK: ENCODE turns a payload into standard base64, DECODE turns base64
// back into bytes and rejects a payload that is not base64. Build it with
// build.sh.
package main

import (
	"encoding/base64"
	"fmt"

	"github.com/streamd/streamd/sdk/go/streamd"
)

func main() {}

func init() {
	streamd.Codec(streamd.Manifest{Name: "base64", Version: "1.0.0"},
		func(p []byte) ([]byte, error) {
			return base64.StdEncoding.AppendEncode(nil, p), nil
		},
		func(p []byte) ([]byte, error) {
			b, err := base64.StdEncoding.AppendDecode(nil, p)
			if err != nil {
				return nil, fmt.Errorf("not base64: %w", err)
			}
			return b, nil
		})
}
