package plugincli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/streamd/streamd/record"
)

// This file is a private codec for the record JSON-lines format described in
// record/doc.go, used until record/ has its own.

// jsonLine is one decoded JSON line: a record, or an error result.
type jsonLine struct {
	Rec         record.Record
	IsErr       bool
	Err         string
	InputOffset int64
}

type rawLine struct {
	Topic       *string         `json:"topic"`
	Key         *string         `json:"key"`
	KeyB64      *string         `json:"key_b64"`
	Value       *string         `json:"value"`
	ValueB64    *string         `json:"value_b64"`
	Headers     json.RawMessage `json:"headers"`
	Partition   *int32          `json:"partition"`
	Offset      *int64          `json:"offset"`
	Timestamp   *string         `json:"timestamp"`
	Error       *string         `json:"error"`
	InputOffset *int64          `json:"input_offset"`
}

// decodeLine decodes one JSON line.
func decodeLine(line []byte) (jsonLine, error) {
	var raw rawLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return jsonLine{}, err
	}
	if dec.More() {
		return jsonLine{}, fmt.Errorf("data after the JSON object")
	}
	if raw.Error != nil {
		if raw.InputOffset == nil {
			return jsonLine{}, fmt.Errorf("error line without input_offset")
		}
		return jsonLine{IsErr: true, Err: *raw.Error, InputOffset: *raw.InputOffset}, nil
	}
	var l jsonLine
	r := &l.Rec
	var err error
	if r.Key, err = bytesField("key", raw.Key, raw.KeyB64); err != nil {
		return l, err
	}
	if r.Value, err = bytesField("value", raw.Value, raw.ValueB64); err != nil {
		return l, err
	}
	if raw.Topic != nil {
		r.Topic = *raw.Topic
	}
	r.Partition, r.Offset = -1, -1
	if raw.Partition != nil {
		r.Partition = *raw.Partition
	}
	if raw.Offset != nil {
		r.Offset = *raw.Offset
	}
	if raw.Timestamp != nil {
		if r.Timestamp, err = time.Parse(time.RFC3339Nano, *raw.Timestamp); err != nil {
			return l, fmt.Errorf("timestamp: %w", err)
		}
	}
	if len(raw.Headers) > 0 && string(raw.Headers) != "null" {
		if r.Headers, err = decodeHeaders(raw.Headers); err != nil {
			return l, fmt.Errorf("headers: %w", err)
		}
	}
	return l, nil
}

func bytesField(name string, s, b64 *string) ([]byte, error) {
	switch {
	case s != nil && b64 != nil:
		return nil, fmt.Errorf("both %s and %s_b64", name, name)
	case s != nil:
		return append([]byte{}, *s...), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_b64: %w", name, err)
		}
		return append([]byte{}, b...), nil
	}
	return nil, nil
}

// decodeHeaders decodes a JSON object of header name -> string (or null),
// keeping order and repeated names.
func decodeHeaders(raw []byte) ([]record.Header, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not an object")
	}
	hs := []record.Header{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name := tok.(string) // object keys are always strings
		tok, err = dec.Token()
		if err != nil {
			return nil, err
		}
		switch v := tok.(type) {
		case string:
			hs = append(hs, record.Header{Key: name, Value: append([]byte{}, v...)})
		case nil:
			hs = append(hs, record.Header{Key: name})
		default:
			return nil, fmt.Errorf("header %q: value is not a string or null", name)
		}
	}
	return hs, nil
}

// appendRecord appends r as one JSON line (without the newline).
func appendRecord(dst []byte, r *record.Record) []byte {
	dst = append(dst, '{')
	sep := func() {
		if dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
	}
	if r.Topic != "" {
		dst = append(dst, `"topic":`...)
		dst = appendJSONString(dst, []byte(r.Topic))
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{"key", r.Key}, {"value", r.Value}} {
		if f.b == nil {
			continue
		}
		sep()
		if utf8.Valid(f.b) {
			dst = append(dst, '"')
			dst = append(dst, f.name...)
			dst = append(dst, `":`...)
			dst = appendJSONString(dst, f.b)
		} else {
			dst = append(dst, '"')
			dst = append(dst, f.name...)
			dst = append(dst, `_b64":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, f.b)
			dst = append(dst, '"')
		}
	}
	if len(r.Headers) > 0 {
		sep()
		dst = append(dst, `"headers":{`...)
		for i, h := range r.Headers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, []byte(h.Key))
			dst = append(dst, ':')
			if h.Value == nil {
				dst = append(dst, "null"...)
			} else {
				dst = appendJSONString(dst, h.Value)
			}
		}
		dst = append(dst, '}')
	}
	sep()
	dst = append(dst, `"partition":`...)
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	if !r.Timestamp.IsZero() {
		dst = append(dst, `,"timestamp":"`...)
		dst = r.Timestamp.UTC().AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	return append(dst, '}')
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
