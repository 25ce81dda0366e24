package admin

import (
	"encoding/json"
	"unicode/utf8"
)

// RedactJSON returns the JSON text b with every string value in it (not
// the keys of objects: they are names the answer is organized by) passed
// through f; b is returned as it is when f changes none. The text keeps
// its order and form, only changed strings are encoded again. b must be
// valid JSON.
func RedactJSON(b []byte, f func(string) string) []byte {
	var out []byte
	last := 0 // b[:last] is in out
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		end := i + 1
		for end < len(b) && b[end] != '"' {
			if b[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(b) {
			break
		}
		lit := b[i : end+1]
		k := end + 1
		for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
			k++
		}
		if k < len(b) && b[k] == ':' {
			i = end // a key
			continue
		}
		var s string
		if json.Unmarshal(lit, &s) == nil && utf8.ValidString(s) {
			if r := f(s); r != s {
				enc, _ := json.Marshal(r)
				out = append(append(out, b[last:i]...), enc...)
				last = end + 1
			}
		}
		i = end
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}
