package journal

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/record"
)

// Key names a journal: the Kafka topic its actions go to and its id (the
// Kafka record key).
type Key struct {
	Topic string
	ID    string
}

func (k Key) String() string { return k.Topic + "/" + k.ID }

// MaxIDBytes is the longest journal id, in bytes of UTF-8. An id must be
// valid UTF-8 (it is the Kafka record key, which kafka-journal decodes as
// UTF-8) and 1..MaxIDBytes bytes long, so that it fits every store's index
// (PostgreSQL's B-tree entries are limited to about 2.7 kB).
const MaxIDBytes = 1024

// check reports a key the journal cannot use: a topic that is not a legal
// Kafka topic name, an id that is empty, too long or not UTF-8.
func (k Key) check() error {
	if err := checkTopic(k.Topic); err != nil {
		return fmt.Errorf("journal topic %q: %w: %w", k.Topic, err, ErrInvalid)
	}
	if err := checkID(k.ID); err != nil {
		return fmt.Errorf("journal %s: id: %w: %w", k.Topic, err, ErrInvalid)
	}
	return nil
}

func checkID(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case len(id) > MaxIDBytes:
		return fmt.Errorf("%d bytes, over the limit of %d", len(id), MaxIDBytes)
	case !utf8.ValidString(id):
		return errors.New("not valid UTF-8")
	}
	return nil
}

// checkTopic applies Kafka's rules for topic names.
func checkTopic(t string) error {
	switch {
	case t == "":
		return errors.New("empty")
	case len(t) > 249:
		return fmt.Errorf("%d characters, over Kafka's limit of 249", len(t))
	case t == "." || t == "..":
		return errors.New(`"." and ".." are not topic names`)
	}
	for _, c := range []byte(t) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("character %q: Kafka topic names use only ASCII letters, digits, '.', '_' and '-'", c)
		}
	}
	return nil
}

// Position is where an action was written: its Kafka partition and offset.
type Position struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// PayloadType is the type of an event's payload.
type PayloadType string

// The payload types. An event without a payload has PayloadType "".
const (
	PayloadJSON   PayloadType = "json"
	PayloadText   PayloadType = "text"
	PayloadBinary PayloadType = "binary"
)

// Event is one journal event.
//
// Its JSON form (the CLI's and the HTTP API's) is kafka-journal's event
// form, with base64 for binary payloads:
//
//	{"seqNr":1,"tags":["a"],"payload":{"any":"json"}}
//	{"seqNr":2,"payloadType":"text","payload":"some text"}
//	{"seqNr":3,"payloadType":"binary","payload":"AAEC"}
//	{"seqNr":4}
type Event struct {
	// SeqNr is chosen by the writer: 1-based, increasing within a journal.
	SeqNr int64
	Tags  []string
	// PayloadType is the type of Payload; "" means no payload.
	PayloadType PayloadType
	// Payload is raw JSON (PayloadJSON), UTF-8 text (PayloadText) or bytes
	// (PayloadBinary).
	Payload []byte
	// Timestamp is the Kafka timestamp of the Append that carried the event
	// (set by Read).
	Timestamp time.Time
}

type eventJSON struct {
	SeqNr       int64           `json:"seqNr"`
	Tags        []string        `json:"tags,omitempty"`
	PayloadType PayloadType     `json:"payloadType,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (e Event) MarshalJSON() ([]byte, error) {
	j := eventJSON{SeqNr: e.SeqNr, Tags: e.Tags}
	switch e.PayloadType {
	case "":
	case PayloadJSON:
		j.Payload = e.Payload
	case PayloadText:
		j.PayloadType = PayloadText
		j.Payload = record.AppendJSONString(nil, e.Payload)
	case PayloadBinary:
		j.PayloadType = PayloadBinary
		j.Payload, _ = json.Marshal(base64.StdEncoding.EncodeToString(e.Payload))
	default:
		return nil, fmt.Errorf("event %d: unknown payloadType %q", e.SeqNr, e.PayloadType)
	}
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler.
func (e *Event) UnmarshalJSON(b []byte) error {
	var j eventJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Event{SeqNr: j.SeqNr, Tags: j.Tags}
	if j.SeqNr < 1 {
		return fmt.Errorf("event: seqNr %d: must be >= 1", j.SeqNr)
	}
	if len(j.Payload) == 0 || string(j.Payload) == "null" {
		if j.PayloadType != "" && j.PayloadType != PayloadJSON {
			return fmt.Errorf("event %d: payloadType %q without a payload", j.SeqNr, j.PayloadType)
		}
		return nil
	}
	switch j.PayloadType {
	case "", PayloadJSON:
		e.PayloadType, e.Payload = PayloadJSON, j.Payload
	case PayloadText:
		var s string
		if err := json.Unmarshal(j.Payload, &s); err != nil {
			return fmt.Errorf("event %d: text payload is not a JSON string", j.SeqNr)
		}
		e.PayloadType, e.Payload = PayloadText, []byte(s)
	case PayloadBinary:
		var s string
		if err := json.Unmarshal(j.Payload, &s); err != nil {
			return fmt.Errorf("event %d: binary payload is not a base64 string", j.SeqNr)
		}
		p, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return fmt.Errorf("event %d: binary payload: %w", j.SeqNr, err)
		}
		e.PayloadType, e.Payload = PayloadBinary, p
	default:
		return fmt.Errorf("event %d: unknown payloadType %q (json, text or binary)", j.SeqNr, j.PayloadType)
	}
	return nil
}

func kindOf(t PayloadType) (action.PayloadKind, error) {
	switch t {
	case "":
		return action.PayloadNone, nil
	case PayloadJSON:
		return action.PayloadJSON, nil
	case PayloadText:
		return action.PayloadText, nil
	case PayloadBinary:
		return action.PayloadBinary, nil
	}
	return 0, fmt.Errorf("unknown payloadType %q", t)
}

func typeOf(k action.PayloadKind) PayloadType {
	switch k {
	case action.PayloadJSON:
		return PayloadJSON
	case action.PayloadText:
		return PayloadText
	case action.PayloadBinary:
		return PayloadBinary
	}
	return ""
}
