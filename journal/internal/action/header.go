package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/streamd/streamd/internal/x/jsonscan"
	"github.com/streamd/streamd/record"
)

func validUTF8(b []byte) bool { return utf8.Valid(b) }

// HeaderKey is the Kafka header that carries an action.
const HeaderKey = "journal.action"

// Kind names an action.
type Kind uint8

// The action kinds. KindUnknown is a header that names no known action: a
// consumer skips such records.
const (
	KindUnknown Kind = iota
	KindAppend
	KindDelete
	KindPurge
	KindMark
)

func (k Kind) String() string {
	switch k {
	case KindAppend:
		return "append"
	case KindDelete:
		return "delete"
	case KindPurge:
		return "purge"
	case KindMark:
		return "mark"
	}
	return "unknown"
}

// Payload formats of an Append record value (the header's payloadType).
const (
	FormatJSON   = "json"
	FormatBinary = "binary"
)

// Header is a decoded journal.action header.
type Header struct {
	Kind Kind
	// From and To are the Append's seqNr range (inclusive); To alone is a
	// Delete's deleteTo.
	From, To int64
	// ID is a Mark's id.
	ID string
	// Origin and Version are optional ("" = absent).
	Origin, Version string
	// PayloadType is an Append's payload format: FormatJSON or FormatBinary.
	PayloadType string
	// Metadata is an Append's metadata.data JSON value (nil = absent).
	Metadata json.RawMessage
	// Legacy marks an Append header without a metadata field (old writers);
	// it re-encodes without one.
	Legacy bool
}

// ErrMalformed wraps every decoding error of outside bytes.
var ErrMalformed = errors.New("malformed journal action")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// DecodeHeader decodes a journal.action header value. A header that names
// no known action yields Kind KindUnknown and no error; bytes that are not
// a JSON object, or a known action with bad fields, are an error wrapping
// ErrMalformed.
func DecodeHeader(b []byte) (Header, error) {
	if !jsonscan.Valid(b) {
		var v any
		return Header{}, malformed("header is not a JSON object: %v", json.Unmarshal(b, &v))
	}
	if t := bytes.TrimSpace(b); string(t) == "null" {
		return Header{Kind: KindUnknown}, nil
	}
	top, err := fields(b, "append", "mark", "delete", "purge")
	if err != nil {
		return Header{}, malformed("header is not a JSON object")
	}
	// The original tries the names in this order and takes the first whose
	// value is an object.
	var (
		k   Kind
		raw json.RawMessage
	)
	switch {
	case isObject(top[0]):
		k, raw = KindAppend, top[0]
	case isObject(top[1]):
		k, raw = KindMark, top[1]
	case isObject(top[2]):
		k, raw = KindDelete, top[2]
	case isObject(top[3]):
		k, raw = KindPurge, top[3]
	default:
		return Header{Kind: KindUnknown}, nil
	}
	f, err := fields(raw, "range", "to", "id", "origin", "version", "payloadType", "metadata")
	if err != nil {
		return Header{}, malformed("%s: %v", k, err)
	}
	fRange, fTo, fID, fOrigin, fVersion, fPayloadType, fMetadata := f[0], f[1], f[2], f[3], f[4], f[5], f[6]
	h := Header{Kind: k}
	if h.Origin, err = optString(fOrigin, "origin"); err != nil {
		return Header{}, malformed("%s: %v", k, err)
	}
	if h.Version, err = optString(fVersion, "version"); err != nil {
		return Header{}, malformed("%s: %v", k, err)
	}
	switch k {
	case KindAppend:
		if fRange == nil {
			return Header{}, malformed("append: missing range")
		}
		if !isObject(fRange) {
			return Header{}, malformed("append: range is not an object")
		}
		rf, err := fields(fRange, "from", "to")
		if err != nil {
			return Header{}, malformed("append: range: %v", err)
		}
		if h.From, err = seqNr(rf[0], "from"); err != nil {
			return Header{}, malformed("append: range: %v", err)
		}
		if h.To, err = seqNr(rf[1], "to"); err != nil {
			return Header{}, malformed("append: range: %v", err)
		}
		if h.From > h.To {
			return Header{}, malformed("append: range from %d > to %d", h.From, h.To)
		}
		pt, err := optString(fPayloadType, "payloadType")
		if err != nil {
			return Header{}, malformed("append: %v", err)
		}
		if pt != FormatJSON && pt != FormatBinary {
			return Header{}, malformed("append: payloadType %q is not json or binary", pt)
		}
		h.PayloadType = pt
		// A metadata that is not an object means empty, as in the original.
		h.Legacy = fMetadata == nil
		if isObject(fMetadata) {
			mf, err := fields(fMetadata, "data")
			if err != nil {
				return Header{}, malformed("append: metadata: %v", err)
			}
			if mf[0] != nil && !isNull(mf[0]) {
				h.Metadata = compact(mf[0])
			}
		}
	case KindDelete:
		if h.To, err = seqNr(fTo, "to"); err != nil {
			return Header{}, malformed("delete: %v", err)
		}
	case KindMark:
		if fID == nil {
			return Header{}, malformed("mark: missing id")
		}
		id, ok := stringValue(fID)
		if !ok && !isNull(fID) {
			return Header{}, malformed("mark: id is not a string")
		}
		h.ID = id
	}
	return h, nil
}

// EncodeHeader encodes h as the original does: compact JSON, fields in
// order, absent optional fields omitted, Append metadata always present.
func EncodeHeader(h Header) ([]byte, error) {
	b := make([]byte, 0, 96)
	b = append(b, `{"`...)
	b = append(b, h.Kind.String()...)
	b = append(b, `":{`...)
	switch h.Kind {
	case KindAppend:
		if h.From < 1 || h.From > h.To {
			return nil, fmt.Errorf("append header: bad range %d..%d", h.From, h.To)
		}
		if h.PayloadType != FormatJSON && h.PayloadType != FormatBinary {
			return nil, fmt.Errorf("append header: payloadType %q is not json or binary", h.PayloadType)
		}
		b = append(b, `"range":{"from":`...)
		b = strconv.AppendInt(b, h.From, 10)
		b = append(b, `,"to":`...)
		b = strconv.AppendInt(b, h.To, 10)
		b = append(b, '}')
		b = appendOrigin(b, h, true)
		b = append(b, `,"payloadType":`...)
		b = record.AppendJSONString(b, h.PayloadType)
		if !h.Legacy || h.Metadata != nil {
			b = append(b, `,"metadata":{`...)
			if h.Metadata != nil {
				b = append(b, `"data":`...)
				b = append(b, compact(h.Metadata)...)
			}
			b = append(b, '}')
		}
	case KindDelete:
		if h.To < 1 {
			return nil, fmt.Errorf("delete header: to %d < 1", h.To)
		}
		b = append(b, `"to":`...)
		b = strconv.AppendInt(b, h.To, 10)
		b = appendOrigin(b, h, true)
	case KindPurge:
		b = appendOrigin(b, h, false)
	case KindMark:
		b = append(b, `"id":`...)
		b = record.AppendJSONString(b, h.ID)
		b = appendOrigin(b, h, true)
	default:
		return nil, fmt.Errorf("header: cannot encode action kind %d", h.Kind)
	}
	b = append(b, "}}"...)
	return b, nil
}

func appendOrigin(b []byte, h Header, comma bool) []byte {
	if h.Origin != "" {
		if comma {
			b = append(b, ',')
		}
		b = append(b, `"origin":`...)
		b = record.AppendJSONString(b, h.Origin)
		comma = true
	}
	if h.Version != "" {
		if comma {
			b = append(b, ',')
		}
		b = append(b, `"version":`...)
		b = record.AppendJSONString(b, h.Version)
	}
	return b
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

func compact(raw json.RawMessage) json.RawMessage {
	if !bytes.ContainsAny(raw, " \t\r\n") {
		return append(json.RawMessage(nil), raw...) // already compact
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return buf.Bytes()
}

func optString(raw json.RawMessage, name string) (string, error) {
	if raw == nil || isNull(raw) {
		return "", nil
	}
	s, ok := stringValue(raw)
	if !ok {
		return "", fmt.Errorf("%s is not a string", name)
	}
	return s, nil
}

func seqNr(raw json.RawMessage, name string) (int64, error) {
	if raw == nil {
		return 0, fmt.Errorf("missing %s", name)
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer: %s", name, raw)
	}
	if n < 1 {
		return 0, fmt.Errorf("%s %d is not a seqNr (>= 1)", name, n)
	}
	return n, nil
}
