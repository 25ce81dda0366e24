// Package streamdjson is the Go SDK's JSON helper: a plugin's config and
// JSON record values, with encoding/json, strictly. It is a package of its
// own so that a plugin that does not use it does not link encoding/json
// (and reflect) in.
//
//	type config struct {
//		Field string `json:"field"`
//	}
//
//	var cfg = config{Field: "name"} // defaults
//
//	func init() {
//		streamdjson.Config(func(c config) error {
//			if c.Field == "" {
//				return errors.New("field must not be empty")
//			}
//			cfg = c
//			return nil
//		}, cfg)
//		streamd.Transform(...)
//	}
package streamdjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/streamd/streamd/sdk/go/streamd"
)

// Config registers, with streamd.OnInit, a config of type T: the
// plugin's config JSON (its TOML config table) is decoded into a copy of
// defaults, refusing keys T does not have (so a misspelt key in the TOML
// fails the load, ERR_CONFIG) and values of the wrong type, and then given
// to fn, whose error also refuses the config.
func Config[T any](fn func(cfg T) error, defaults T) {
	streamd.OnInit(func(config []byte) error {
		cfg := defaults
		if err := Decode(config, &cfg); err != nil {
			return fmt.Errorf("config: %w", err)
		}
		return fn(cfg)
	})
}

// Decode decodes the JSON document b into v, as json.Unmarshal does but
// refusing object members that v's struct types do not have and anything
// after the document.
func Decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON document")
	}
	return nil
}

// Encode appends the compact JSON encoding of v to dst. HTML characters
// (<, >, &) are written as they are, not escaped.
func Encode(dst []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
}
