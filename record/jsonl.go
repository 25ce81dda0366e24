package record

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends r to dst as one compact JSON object, without a newline.
// Fields come in a fixed order (key, value, headers, headers_b64, topic,
// partition, offset, timestamp) so that equal records give equal bytes.
func AppendJSON(dst []byte, r *Record) []byte {
	dst = append(dst, '{')
	first := true
	field := func(name string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
	}
	bytesField := func(name string, b []byte) {
		if b == nil {
			return
		}
		if utf8.Valid(b) {
			field(name)
			dst = AppendJSONString(dst, b)
			return
		}
		field(name + "_b64")
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		dst = append(dst, '"')
	}
	bytesField("key", r.Key)
	bytesField("value", r.Value)
	// Headers are an object (text values, null) and another for values
	// that are not UTF-8 (headers_b64), as long as that keeps their order:
	// names unique and no binary value before a text one. Otherwise they
	// are a list of {"key":...,"value":...|"value_b64":...}.
	var text, bin []int
	listed := false
	for i, h := range r.Headers {
		if h.Value == nil || utf8.Valid(h.Value) {
			text = append(text, i)
			listed = listed || len(bin) > 0
		} else {
			bin = append(bin, i)
		}
		for _, g := range r.Headers[:i] {
			listed = listed || g.Key == h.Key
		}
	}
	headers := func(name string, idx []int, b64 bool) {
		if len(idx) == 0 {
			return
		}
		field(name)
		dst = append(dst, '{')
		for j, i := range idx {
			if j > 0 {
				dst = append(dst, ',')
			}
			h := r.Headers[i]
			dst = AppendJSONString(dst, h.Key)
			dst = append(dst, ':')
			switch {
			case h.Value == nil:
				dst = append(dst, "null"...)
			case b64:
				dst = append(dst, '"')
				dst = base64.StdEncoding.AppendEncode(dst, h.Value)
				dst = append(dst, '"')
			default:
				dst = AppendJSONString(dst, h.Value)
			}
		}
		dst = append(dst, '}')
	}
	if listed {
		field("headers")
		dst = append(dst, '[')
		for i, h := range r.Headers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"key":`...)
			dst = AppendJSONString(dst, h.Key)
			switch {
			case h.Value == nil:
				dst = append(dst, `,"value":null`...)
			case utf8.Valid(h.Value):
				dst = append(dst, `,"value":`...)
				dst = AppendJSONString(dst, h.Value)
			default:
				dst = append(dst, `,"value_b64":"`...)
				dst = base64.StdEncoding.AppendEncode(dst, h.Value)
				dst = append(dst, '"')
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	} else {
		headers("headers", text, false)
		headers("headers_b64", bin, true)
	}
	if r.Topic != "" {
		field("topic")
		dst = AppendJSONString(dst, r.Topic)
	}
	field("partition")
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	field("offset")
	dst = strconv.AppendInt(dst, r.Offset, 10)
	if !r.Timestamp.IsZero() {
		field("timestamp")
		dst = append(dst, '"')
		dst = r.Timestamp.UTC().AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// AppendJSONString appends s as a JSON string, escaping only '"', '\' and
// control characters (as \n \r \t \b \f or \u00xx); everything else is
// written raw. Bytes that are not valid UTF-8 become U+FFFD.
func AppendJSONString[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			switch e := jsonEscapes[c]; e {
			case 0:
				dst = append(dst, c)
			case 'u':
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, '\\', e)
			}
			i++
			continue
		}
		// A rune is at most utf8.UTFMax bytes: converting those few bytes
		// of a []byte does not allocate.
		r, n := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// jsonEscapes holds, for each ASCII byte, what follows the backslash that
// escapes it in a JSON string: 'u' for \u00xx, 0 for a byte written as it
// is.
var jsonEscapes = func() (t [utf8.RuneSelf]byte) {
	for c := range byte(0x20) {
		t[c] = 'u'
	}
	t['"'], t['\\'] = '"', '\\'
	t['\n'], t['\r'], t['\t'], t['\b'], t['\f'] = 'n', 'r', 't', 'b', 'f'
	return t
}()

type jsonRecord struct {
	Key        *string         `json:"key"`
	KeyB64     *string         `json:"key_b64"`
	Value      *string         `json:"value"`
	ValueB64   *string         `json:"value_b64"`
	Headers    json.RawMessage `json:"headers"`
	HeadersB64 json.RawMessage `json:"headers_b64"`
	Topic      string          `json:"topic"`
	Partition  *int32          `json:"partition"`
	Offset     *int64          `json:"offset"`
	Timestamp  json.RawMessage `json:"timestamp"`
}

type jsonHeader struct {
	Key      *string `json:"key"`
	Value    *string `json:"value"`
	ValueB64 *string `json:"value_b64"`
}

// DecodeJSON parses one JSON-lines record. Unknown fields are an error.
// A missing key or value is null, a missing topic "", a missing partition
// 0, a missing offset -1 and a missing timestamp none (the zero Time).
// timestamp is an RFC 3339 string or a number of Unix milliseconds (-1:
// none). headers is an object of name: string|null (with headers_b64 for
// values that are base64), or a list of {"key":K,"value":V} and
// {"key":K,"value_b64":B}, which can say any order and repeated names.
func DecodeJSON(line []byte) (Record, error) {
	var j jsonRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Record{}, err
	}
	if dec.More() {
		return Record{}, errors.New("more than one JSON value on the line")
	}
	var r Record
	var err error
	if r.Key, err = pickBytes("key", j.Key, j.KeyB64); err != nil {
		return Record{}, err
	}
	if r.Value, err = pickBytes("value", j.Value, j.ValueB64); err != nil {
		return Record{}, err
	}
	if h := bytes.TrimSpace(j.Headers); len(h) > 0 && h[0] == '[' {
		if len(j.HeadersB64) > 0 && string(j.HeadersB64) != "null" {
			return Record{}, errors.New("headers_b64 cannot go with a list of headers: give each binary value as value_b64 in the list")
		}
		if r.Headers, err = decodeHeaderList(h); err != nil {
			return Record{}, err
		}
	} else {
		if r.Headers, err = decodeHeaders(j.Headers, false, nil); err != nil {
			return Record{}, fmt.Errorf("headers: %w", err)
		}
		if r.Headers, err = decodeHeaders(j.HeadersB64, true, r.Headers); err != nil {
			return Record{}, fmt.Errorf("headers_b64: %w", err)
		}
	}
	r.Topic = j.Topic
	if j.Partition != nil {
		r.Partition = *j.Partition
	}
	r.Offset = -1
	if j.Offset != nil {
		r.Offset = *j.Offset
	}
	if r.Timestamp, err = decodeTimestamp(j.Timestamp); err != nil {
		return Record{}, fmt.Errorf("timestamp: %w", err)
	}
	return r, nil
}

// decodeTimestamp reads an RFC 3339 string or Unix milliseconds (-1 or
// null: none).
func decodeTimestamp(raw json.RawMessage) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return time.Time{}, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, err
		}
		if s == "" {
			return time.Time{}, nil
		}
		return time.Parse(time.RFC3339Nano, s)
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	switch {
	case err != nil:
		return time.Time{}, fmt.Errorf("want an RFC 3339 string or Unix milliseconds, got %s", raw)
	case ms == -1:
		return time.Time{}, nil
	case ms < -1:
		return time.Time{}, fmt.Errorf("%d milliseconds: want -1 (none) or more", ms)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// decodeHeaderList reads headers as a list of {"key":K,"value":V} or
// {"key":K,"value_b64":B}.
func decodeHeaderList(raw []byte) ([]Header, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	hs := make([]Header, 0, len(list))
	for i, item := range list {
		var h jsonHeader
		dec := json.NewDecoder(bytes.NewReader(item))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&h); err != nil {
			return nil, fmt.Errorf("headers[%d]: %w", i, err)
		}
		if h.Key == nil {
			return nil, fmt.Errorf(`headers[%d]: missing "key"`, i)
		}
		v, err := pickBytes("value", h.Value, h.ValueB64)
		if err != nil {
			return nil, fmt.Errorf("headers[%d]: %w", i, err)
		}
		hs = append(hs, Header{Key: *h.Key, Value: v})
	}
	if len(hs) == 0 {
		return nil, nil
	}
	return hs, nil
}

func pickBytes(name string, s, b64 *string) ([]byte, error) {
	switch {
	case s != nil && b64 != nil:
		return nil, fmt.Errorf("both %s and %s_b64 are set", name, name)
	case s != nil:
		return []byte(*s), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_b64: %w", name, err)
		}
		return b, nil
	}
	return nil, nil
}

// decodeHeaders reads a JSON object of header name -> string|null, keeping
// order and repeated names.
func decodeHeaders(raw json.RawMessage, b64 bool, hs []Header) ([]Header, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return hs, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New(`want an object of name: value, or a list of {"key":...,"value":...}`)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name := t.(string)
		if t, err = dec.Token(); err != nil {
			return nil, err
		}
		switch v := t.(type) {
		case nil:
			hs = append(hs, Header{Key: name})
		case string:
			b := []byte(v)
			if b64 {
				if b, err = base64.StdEncoding.DecodeString(v); err != nil {
					return nil, fmt.Errorf("%q: %w", name, err)
				}
			}
			hs = append(hs, Header{Key: name, Value: b})
		default:
			return nil, fmt.Errorf("%q: value must be a string or null", name)
		}
	}
	return hs, nil
}

// LineError is a JSON-lines decoding error with its position.
type LineError struct {
	Name string // file name, may be empty
	Line int    // 1-based
	Err  error
}

func (e *LineError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Reader reads JSON-lines records. Blank lines are skipped. Errors are
// *LineError values naming the line.
type Reader struct {
	name string
	sc   *bufio.Scanner
	line int
}

// NewReader returns a Reader over r; name is used in errors.
func NewReader(r io.Reader, name string) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	return &Reader{name: name, sc: sc}
}

// Line returns the line number of the record last returned.
func (r *Reader) Line() int { return r.line }

// Next returns the next record, or io.EOF after the last.
func (r *Reader) Next() (Record, error) {
	for r.sc.Scan() {
		r.line++
		b := bytes.TrimSpace(r.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		rec, err := DecodeJSON(b)
		if err != nil {
			return Record{}, &LineError{Name: r.name, Line: r.line, Err: err}
		}
		return rec, nil
	}
	if err := r.sc.Err(); err != nil {
		return Record{}, &LineError{Name: r.name, Line: r.line + 1, Err: err}
	}
	return Record{}, io.EOF
}
