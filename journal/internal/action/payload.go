package action

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/streamd/streamd/internal/x/jsonscan"
	"github.com/streamd/streamd/record"
)

// PayloadKind is the kind of one event's payload; the values are the
// binary format's discriminator.
type PayloadKind uint8

// The payload kinds.
const (
	PayloadNone   PayloadKind = 0
	PayloadBinary PayloadKind = 1
	PayloadJSON   PayloadKind = 2
	PayloadText   PayloadKind = 3
)

// Event is one event of an Append.
type Event struct {
	SeqNr int64
	Tags  []string
	Kind  PayloadKind
	// Payload is the raw JSON (PayloadJSON), the UTF-8 text (PayloadText) or
	// the bytes (PayloadBinary); nil for PayloadNone.
	Payload []byte
}

// Metadata is the payload metadata shared by the events of one Append.
type Metadata struct {
	// ExpireAfter is how long after the append the journal may be purged
	// (0 = never).
	ExpireAfter time.Duration
	// ExpireAfterRaw is the JSON token expireAfter was read from, kept so
	// that re-encoding gives the same bytes; empty encodes ExpireAfter in
	// Scala's FiniteDuration form ("1 day").
	ExpireAfterRaw json.RawMessage
	// Data is the user's metadata JSON value (nil = absent).
	Data json.RawMessage
}

// Events is the payload of an Append.
type Events struct {
	Events   []Event
	Metadata Metadata
	// Legacy marks a payload without metadata (JSON without a "metadata"
	// field; binary version 0), so it re-encodes the same way.
	Legacy bool
}

// Format returns the payload format that EncodePayload uses for e: binary
// if any event has a binary payload, else json.
func (e *Events) Format() string {
	for _, ev := range e.Events {
		if ev.Kind == PayloadBinary {
			return FormatBinary
		}
	}
	return FormatJSON
}

// EncodePayload encodes e in e.Format() and returns the bytes and that format.
func EncodePayload(e *Events) ([]byte, string, error) {
	if len(e.Events) == 0 {
		return nil, "", fmt.Errorf("payload: no events")
	}
	f := e.Format()
	var (
		b   []byte
		err error
	)
	if f == FormatBinary {
		b, err = encodeBinary(e)
	} else {
		b, err = encodeJSON(e)
	}
	return b, f, err
}

// EncodePayloadAs encodes e in format (FormatJSON or FormatBinary); the
// json format cannot carry binary payloads.
func EncodePayloadAs(e *Events, format string) ([]byte, error) {
	if len(e.Events) == 0 {
		return nil, fmt.Errorf("payload: no events")
	}
	switch format {
	case FormatBinary:
		return encodeBinary(e)
	case FormatJSON:
		return encodeJSON(e)
	}
	return nil, fmt.Errorf("payload: unknown format %q", format)
}

// DecodePayload decodes an Append record value in format (the header's
// payloadType).
func DecodePayload(format string, b []byte) (*Events, error) {
	switch format {
	case FormatJSON:
		return decodeJSON(b)
	case FormatBinary:
		return decodeBinary(b)
	}
	return nil, malformed("payload: unknown payloadType %q", format)
}

// ---- json format

func encodeJSON(e *Events) ([]byte, error) {
	b := make([]byte, 0, 64*len(e.Events))
	b = append(b, `{"events":[`...)
	for i, ev := range e.Events {
		if i > 0 {
			b = append(b, ',')
		}
		if ev.SeqNr < 1 {
			return nil, fmt.Errorf("payload: event %d: seqNr %d < 1", i, ev.SeqNr)
		}
		b = append(b, `{"seqNr":`...)
		b = strconv.AppendInt(b, ev.SeqNr, 10)
		b = append(b, `,"tags":[`...)
		for j, t := range ev.Tags {
			if j > 0 {
				b = append(b, ',')
			}
			b = record.AppendJSONString(b, t)
		}
		b = append(b, ']')
		switch ev.Kind {
		case PayloadNone:
		case PayloadJSON:
			if !jsonscan.Valid(ev.Payload) {
				return nil, fmt.Errorf("payload: event seqNr %d: json payload is not valid JSON", ev.SeqNr)
			}
			b = append(b, `,"payloadType":"json","payload":`...)
			b = append(b, compact(ev.Payload)...)
		case PayloadText:
			b = append(b, `,"payloadType":"text","payload":`...)
			b = record.AppendJSONString(b, ev.Payload)
		default:
			return nil, fmt.Errorf("payload: event seqNr %d: payload kind %d in json format", ev.SeqNr, ev.Kind)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if !e.Legacy {
		b = append(b, `,"metadata":`...)
		b = appendMetadata(b, e.Metadata)
	}
	return append(b, '}'), nil
}

func appendMetadata(b []byte, m Metadata) []byte {
	b = append(b, '{')
	comma := false
	if len(m.ExpireAfterRaw) > 0 {
		b = append(b, `"expireAfter":`...)
		b = append(b, compact(m.ExpireAfterRaw)...)
		comma = true
	} else if m.ExpireAfter > 0 {
		b = append(b, `"expireAfter":`...)
		b = record.AppendJSONString(b, FormatDuration(m.ExpireAfter))
		comma = true
	}
	if m.Data != nil {
		if comma {
			b = append(b, ',')
		}
		b = append(b, `"data":`...)
		b = append(b, compact(m.Data)...)
	}
	return append(b, '}')
}

func decodeJSON(b []byte) (*Events, error) {
	if !jsonscan.Valid(b) {
		var v any
		return nil, malformed("json payload: %v", json.Unmarshal(b, &v))
	}
	var top []json.RawMessage
	if t := bytes.TrimSpace(b); string(t) != "null" {
		var err error
		if top, err = fields(b, "events", "metadata"); err != nil {
			return nil, malformed("json payload: %v", err)
		}
	} else {
		top = make([]json.RawMessage, 2)
	}
	var evs []json.RawMessage
	if top[0] != nil && !isNull(top[0]) {
		var ok bool
		if evs, ok = elements(top[0]); !ok {
			return nil, malformed("json payload: events is not a list")
		}
	}
	if len(evs) == 0 {
		return nil, malformed("json payload: no events")
	}
	e := &Events{Events: make([]Event, 0, len(evs))}
	for i, raw := range evs {
		if isNull(raw) {
			return nil, malformed("json payload: event %d is not an object", i)
		}
		f, err := fields(raw, "seqNr", "tags", "payloadType", "payload")
		if err != nil {
			return nil, malformed("json payload: event %d: %v", i, err)
		}
		var ev Event
		if ev.SeqNr, err = seqNr(f[0], "seqNr"); err != nil {
			return nil, malformed("json payload: event %d: %v", i, err)
		}
		if f[1] != nil && !isNull(f[1]) {
			tags, ok := elements(f[1])
			if !ok {
				return nil, malformed("json payload: event %d: tags is not a list of strings", i)
			}
			for _, t := range tags {
				s, ok := stringValue(t)
				if !ok && !isNull(t) {
					return nil, malformed("json payload: event %d: tags is not a list of strings", i)
				}
				ev.Tags = append(ev.Tags, s)
			}
		}
		pt, err := optString(f[2], "payloadType")
		if err != nil {
			return nil, malformed("json payload: event %d: %v", i, err)
		}
		raw := f[3]
		has := raw != nil && !isNull(raw)
		switch {
		case !has:
			ev.Kind = PayloadNone
		case pt == "" || pt == "json":
			ev.Kind, ev.Payload = PayloadJSON, compact(raw)
		case pt == "text":
			s, ok := stringValue(raw)
			if !ok {
				return nil, malformed("json payload: event %d: text payload is not a string", i)
			}
			ev.Kind, ev.Payload = PayloadText, []byte(s)
		default:
			return nil, malformed("json payload: event %d: payloadType %q is not json or text", i, pt)
		}
		e.Events = append(e.Events, ev)
	}
	if top[1] == nil || isNull(top[1]) {
		e.Legacy = true
		return e, nil
	}
	m, err := decodeMetadata(top[1])
	if err != nil {
		return nil, malformed("json payload: %v", err)
	}
	e.Metadata = m
	return e, nil
}

func decodeMetadata(raw []byte) (Metadata, error) {
	if !jsonscan.Valid(raw) || !isObject(raw) {
		return Metadata{}, fmt.Errorf("metadata is not a JSON object")
	}
	f, err := fields(raw, "data", "expireAfter")
	if err != nil {
		return Metadata{}, fmt.Errorf("metadata is not a JSON object")
	}
	var m Metadata
	if d := f[0]; d != nil && !isNull(d) {
		m.Data = compact(d)
	}
	if x := f[1]; x != nil && !isNull(x) {
		d, err := parseExpireAfter(x)
		if err != nil {
			return Metadata{}, fmt.Errorf("metadata: expireAfter: %v", err)
		}
		m.ExpireAfter, m.ExpireAfterRaw = d, compact(x)
	}
	return m, nil
}

// parseExpireAfter reads a duration string ("1 day", "30s") or a number
// of milliseconds.
func parseExpireAfter(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return ParseDuration(s)
	}
	ms, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is neither a duration string nor milliseconds", raw)
	}
	if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, fmt.Errorf("%d milliseconds is out of range", ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

var durationUnits = []struct {
	d     time.Duration
	name  string
	label []string
}{
	{24 * time.Hour, "day", []string{"d", "day", "days"}},
	{time.Hour, "hour", []string{"h", "hr", "hrs", "hour", "hours"}},
	{time.Minute, "minute", []string{"m", "min", "mins", "minute", "minutes"}},
	{time.Second, "second", []string{"s", "sec", "secs", "second", "seconds"}},
	{time.Millisecond, "millisecond", []string{"ms", "milli", "millis", "millisecond", "milliseconds"}},
	{time.Microsecond, "microsecond", []string{"µs", "micro", "micros", "microsecond", "microseconds"}},
	{time.Nanosecond, "nanosecond", []string{"ns", "nano", "nanos", "nanosecond", "nanoseconds"}},
}

// ParseDuration parses Scala's finite Duration text: a number and a unit,
// e.g. "1 day", "2 hours", "500ms".
func ParseDuration(s string) (time.Duration, error) {
	t := strings.Join(strings.Fields(s), "")
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.' || t[i] == '-' || t[i] == '+') {
		i++
	}
	num, unit := t[:i], t[i:]
	for _, u := range durationUnits {
		for _, l := range u.label {
			if unit != l {
				continue
			}
			if n, err := strconv.ParseInt(num, 10, 64); err == nil {
				if n < 0 || n > math.MaxInt64/int64(u.d) {
					return 0, fmt.Errorf("duration %q is out of range", s)
				}
				return time.Duration(n) * u.d, nil
			}
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || f < 0 || f*float64(u.d) >= math.MaxInt64 || math.IsNaN(f) {
				return 0, fmt.Errorf("duration %q: bad number %q", s, num)
			}
			return time.Duration(f * float64(u.d)), nil
		}
	}
	return 0, fmt.Errorf("duration %q: unknown unit %q", s, unit)
}

// FormatDuration writes d as Scala's FiniteDuration.toString does, in the
// largest unit that divides it: "1 day", "36 hours", "1500 milliseconds".
func FormatDuration(d time.Duration) string {
	for _, u := range durationUnits {
		if d%u.d == 0 {
			n := int64(d / u.d)
			if n == 1 {
				return "1 " + u.name
			}
			return strconv.FormatInt(n, 10) + " " + u.name + "s"
		}
	}
	return strconv.FormatInt(int64(d), 10) + " nanoseconds"
}

// ---- binary format

func encodeBinary(e *Events) ([]byte, error) {
	b := make([]byte, 0, 64*len(e.Events))
	if e.Legacy {
		b = append(b, 0)
	} else {
		b = append(b, 1)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Events)))
	for _, ev := range e.Events {
		if ev.SeqNr < 1 {
			return nil, fmt.Errorf("payload: seqNr %d < 1", ev.SeqNr)
		}
		lenAt := len(b)
		b = append(b, 0, 0, 0, 0)
		b = binary.BigEndian.AppendUint64(b, uint64(ev.SeqNr))
		tagsAt := len(b)
		b = append(b, 0, 0, 0, 0)
		for _, t := range ev.Tags {
			b = binary.BigEndian.AppendUint32(b, uint32(len(t)))
			b = append(b, t...)
		}
		binary.BigEndian.PutUint32(b[tagsAt:], uint32(len(b)-tagsAt-4))
		body := ev.Payload
		switch ev.Kind {
		case PayloadNone:
			body = nil
		case PayloadJSON:
			if !jsonscan.Valid(body) {
				return nil, fmt.Errorf("payload: event seqNr %d: json payload is not valid JSON", ev.SeqNr)
			}
			body = compact(body)
		case PayloadBinary, PayloadText:
		default:
			return nil, fmt.Errorf("payload: event seqNr %d: unknown payload kind %d", ev.SeqNr, ev.Kind)
		}
		b = append(b, byte(ev.Kind))
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
		binary.BigEndian.PutUint32(b[lenAt:], uint32(len(b)-lenAt-4))
	}
	if !e.Legacy {
		b = appendMetadata(b, e.Metadata)
	}
	return b, nil
}

type reader struct {
	b   []byte
	off int
}

func (r *reader) n(n int, what string) ([]byte, error) {
	if n < 0 || len(r.b)-r.off < n {
		return nil, malformed("binary payload: %s: need %d bytes at offset %d, have %d", what, n, r.off, len(r.b)-r.off)
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

func (r *reader) i32(what string) (int, error) {
	p, err := r.n(4, what)
	if err != nil {
		return 0, err
	}
	v := int32(binary.BigEndian.Uint32(p))
	if v < 0 {
		return 0, malformed("binary payload: %s: negative length %d at offset %d", what, v, r.off-4)
	}
	return int(v), nil
}

// sized reads an int32 length (named length in errors), then that many
// bytes (named what).
func (r *reader) sized(length, what string) ([]byte, error) {
	n, err := r.i32(length)
	if err != nil {
		return nil, err
	}
	return r.n(n, what)
}

func decodeBinary(b []byte) (*Events, error) {
	if len(b) == 0 {
		return nil, malformed("binary payload: empty")
	}
	r := &reader{b: b, off: 1}
	e := &Events{Legacy: b[0] != 1}
	n, err := r.i32("event count")
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, malformed("binary payload: no events")
	}
	// Each event takes at least 21 bytes: do not trust n for allocation.
	e.Events = make([]Event, 0, min(n, len(b)/21+1))
	for i := 0; i < n; i++ {
		p, err := r.sized("event length", "event")
		if err != nil {
			return nil, err
		}
		ev, err := decodeBinaryEvent(p)
		if err != nil {
			return nil, malformed("binary payload: event %d: %v", i, err)
		}
		e.Events = append(e.Events, ev)
	}
	rest := b[r.off:]
	if !e.Legacy {
		m, err := decodeMetadata(rest)
		if err != nil {
			return nil, malformed("binary payload: %v", err)
		}
		e.Metadata = m
	}
	return e, nil
}

func decodeBinaryEvent(p []byte) (Event, error) {
	r := &reader{b: p}
	var ev Event
	s, err := r.n(8, "seqNr")
	if err != nil {
		return ev, err
	}
	ev.SeqNr = int64(binary.BigEndian.Uint64(s))
	if ev.SeqNr < 1 {
		return ev, fmt.Errorf("seqNr %d < 1", ev.SeqNr)
	}
	tp, err := r.sized("tags length", "tags")
	if err != nil {
		return ev, err
	}
	tr := &reader{b: tp}
	for tr.off < len(tp) {
		t, err := tr.sized("tag length", "tag")
		if err != nil {
			return ev, err
		}
		if !utf8.Valid(t) {
			return ev, fmt.Errorf("tag is not UTF-8")
		}
		ev.Tags = append(ev.Tags, string(t))
	}
	k, err := r.n(1, "payload kind")
	if err != nil {
		return ev, err
	}
	ev.Kind = PayloadKind(k[0])
	body, err := r.sized("payload length", "payload")
	if err != nil {
		return ev, err
	}
	if r.off != len(p) {
		return ev, fmt.Errorf("%d trailing bytes", len(p)-r.off)
	}
	switch ev.Kind {
	case PayloadNone:
		if len(body) != 0 {
			return ev, fmt.Errorf("payload kind none with %d bytes", len(body))
		}
	case PayloadBinary:
		ev.Payload = append([]byte{}, body...)
	case PayloadJSON:
		if !jsonscan.Valid(body) {
			return ev, fmt.Errorf("json payload is not valid JSON")
		}
		ev.Payload = compact(body)
	case PayloadText:
		if !utf8.Valid(body) {
			return ev, fmt.Errorf("text payload is not UTF-8")
		}
		ev.Payload = append([]byte{}, body...)
	default:
		return ev, fmt.Errorf("unknown payload kind %d", ev.Kind)
	}
	return ev, nil
}
