package action

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/streamd/streamd/internal/x/jsonscan"
)

// fields returns the values of the members of the JSON object raw whose
// names match names (case-insensitively, the last one winning), as
// encoding/json does when it decodes into a struct of json.RawMessage
// fields, without reflection. raw must be valid JSON (the caller validated
// the whole document); a raw that is not an object is an error.
func fields(raw []byte, names ...string) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(names))
	i := jsonscan.SkipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	i = jsonscan.SkipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return out, nil
	}
	for i < len(raw) {
		kEnd := jsonscan.SkipString(raw, i)
		key := raw[i+1 : kEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if err := json.Unmarshal(raw[i:kEnd], &s); err != nil {
				return nil, err
			}
			key = []byte(s)
		}
		i = jsonscan.SkipWS(raw, kEnd)
		i = jsonscan.SkipWS(raw, i+1) // ':'
		vEnd := jsonscan.Skip(raw, i)
		for n, name := range names {
			if bytes.EqualFold(key, []byte(name)) {
				out[n] = raw[i:vEnd:vEnd]
			}
		}
		i = jsonscan.SkipWS(raw, vEnd)
		if i >= len(raw) || raw[i] == '}' {
			break
		}
		i = jsonscan.SkipWS(raw, i+1) // ','
	}
	return out, nil
}

// elements returns the elements of the JSON array raw (valid JSON); ok is
// false if raw is not an array.
func elements(raw []byte) (els []json.RawMessage, ok bool) {
	i := jsonscan.SkipWS(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	i = jsonscan.SkipWS(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return nil, true
	}
	for i < len(raw) {
		end := jsonscan.Skip(raw, i)
		els = append(els, raw[i:end:end])
		i = jsonscan.SkipWS(raw, end)
		if i >= len(raw) || raw[i] == ']' {
			break
		}
		i = jsonscan.SkipWS(raw, i+1)
	}
	return els, true
}

// stringValue decodes a JSON string value (valid JSON) as encoding/json
// does; ok is false if raw is not a string.
func stringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if s := raw[1 : len(raw)-1]; bytes.IndexByte(s, '\\') < 0 && validUTF8(s) {
		return string(s), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
