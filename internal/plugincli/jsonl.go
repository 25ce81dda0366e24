package plugincli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/streamd/streamd/record"
)

// jsonLine is one line of run output: a record, an error result or a sink's
// written result.
type jsonLine struct {
	Rec         record.Record
	IsErr       bool
	Err         string
	Written     bool
	InputOffset int64
}

type resultLine struct {
	Error       *string `json:"error"`
	Written     *bool   `json:"written"`
	InputOffset *int64  `json:"input_offset"`
}

// decodeLine decodes one line of run output.
func decodeLine(line []byte) (jsonLine, error) {
	if r, err := record.DecodeJSON(line); err == nil {
		return jsonLine{Rec: r}, nil
	} else if !bytes.Contains(line, []byte(`"input_offset"`)) {
		return jsonLine{}, err
	}
	var e resultLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return jsonLine{}, err
	}
	switch {
	case e.InputOffset == nil:
	case e.Error != nil && e.Written == nil:
		return jsonLine{IsErr: true, Err: *e.Error, InputOffset: *e.InputOffset}, nil
	case e.Written != nil && *e.Written && e.Error == nil:
		return jsonLine{Written: true, InputOffset: *e.InputOffset}, nil
	}
	return jsonLine{}, fmt.Errorf("a result line is {\"error\":MSG,\"input_offset\":N} or {\"written\":true,\"input_offset\":N}")
}

// appendError appends an error result line (without the newline).
func appendError(dst []byte, msg string, inputOffset int64) []byte {
	dst = append(dst, `{"error":`...)
	dst = appendJSONString(dst, []byte(msg))
	dst = append(dst, `,"input_offset":`...)
	dst = strconv.AppendInt(dst, inputOffset, 10)
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string with minimal escaping; invalid
// UTF-8 becomes U+FFFD.
func appendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for len(s) > 0 {
		c := s[0]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		case c < utf8.RuneSelf:
			dst = append(dst, c)
		default:
			r, n := utf8.DecodeRune(s)
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, "\ufffd"...)
			} else {
				dst = append(dst, s[:n]...)
			}
			s = s[n:]
			continue
		}
		s = s[1:]
	}
	return append(dst, '"')
}
