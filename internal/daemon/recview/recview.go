// Package recview shows records to people: keys, values and headers as
// text when they are UTF-8, base64 when not, cut at a size limit. The
// console, the tap and `streamd dlq` use it.
package recview

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/streamd/streamd/record"
)

// Data is bytes for display. Exactly one of Text and Base64 is set, unless
// the bytes are null (Null) or empty.
type Data struct {
	Text   string `json:"text,omitempty"`
	Base64 string `json:"base64,omitempty"`
	// Len is the length of the whole value; Cut says Text or Base64 holds
	// only its first bytes.
	Len  int  `json:"len"`
	Cut  bool `json:"cut,omitempty"`
	Null bool `json:"null,omitempty"`
}

// Bytes returns b for display, cut at max bytes (0: not cut). A cut
// never splits a UTF-8 character.
func Bytes(b []byte, max int) Data {
	if b == nil {
		return Data{Null: true}
	}
	d := Data{Len: len(b)}
	if max > 0 && len(b) > max {
		b, d.Cut = b[:max], true
	}
	if utf8.Valid(b) || d.Cut && validCut(b) {
		if d.Cut {
			for len(b) > 0 && !utf8.Valid(b) {
				b = b[:len(b)-1]
			}
		}
		d.Text = string(b)
		return d
	}
	d.Base64 = base64.StdEncoding.EncodeToString(b)
	return d
}

// validCut reports whether b is valid UTF-8 but for a character cut at
// its end.
func validCut(b []byte) bool {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.Valid(b[:len(b)-i]) {
			return !utf8.FullRune(b[len(b)-i:])
		}
	}
	return false
}

// String returns the data as one line of text: the text, or "base64:..."
// and "null"; "…(N bytes)" marks a cut.
func (d Data) String() string {
	var s string
	switch {
	case d.Null:
		return "null"
	case d.Base64 != "":
		s = "base64:" + d.Base64
	default:
		s = d.Text
	}
	if d.Cut {
		s += "…(" + itoa(d.Len) + " bytes)"
	}
	return s
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// Header is one header for display.
type Header struct {
	Key   string `json:"key"`
	Value Data   `json:"value"`
}

// Record is a record for display.
type Record struct {
	Topic     string    `json:"topic,omitempty"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Time      time.Time `json:"time,omitzero"`
	Key       Data      `json:"key"`
	Value     Data      `json:"value"`
	Headers   []Header  `json:"headers,omitempty"`
}

// Of returns r for display, its key, value and each header value cut at
// max bytes (0: not cut).
func Of(r *record.Record, max int) Record {
	v := Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Time: r.Timestamp,
		Key: Bytes(r.Key, max), Value: Bytes(r.Value, max)}
	for _, h := range r.Headers {
		v.Headers = append(v.Headers, Header{Key: h.Key, Value: Bytes(h.Value, max)})
	}
	return v
}
