package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestJSONRoundTrip(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	tests := []struct {
		name string
		in   Record
		want string
	}{
		{"plain", Record{Key: []byte("k"), Value: []byte(`{"a":1}`), Partition: 2, Offset: 7, Timestamp: ts},
			`{"key":"k","value":"{\"a\":1}","partition":2,"offset":7,"timestamp":"2026-01-02T03:04:05.0000006Z"}`},
		{"null key and value", Record{Offset: -1}, `{"partition":0,"offset":-1}`},
		{"binary", Record{Key: []byte{0xff, 0}, Value: []byte("é\n\x01"), Offset: 1},
			`{"key_b64":"/wA=","value":"é\n\u0001","partition":0,"offset":1}`},
		{"text then binary headers", Record{Headers: []Header{{"b", []byte("1")}, {"a", nil}, {"x", []byte{0xfe}}}},
			`{"headers":{"b":"1","a":null},"headers_b64":{"x":"/g=="},"partition":0,"offset":0}`},
		// Repeated names, and a binary header before a
		// text one, are written as a list, which keeps their order.
		{"repeated header names", Record{Headers: []Header{{"b", []byte("1")}, {"a", nil}, {"b", []byte("2")}}},
			`{"headers":[{"key":"b","value":"1"},{"key":"a","value":null},{"key":"b","value":"2"}],"partition":0,"offset":0}`},
		{"binary header first", Record{Headers: []Header{{"x", []byte{0xfe}}, {"a", []byte("1")}}},
			`{"headers":[{"key":"x","value_b64":"/g=="},{"key":"a","value":"1"}],"partition":0,"offset":0}`},
		{"topic", Record{Topic: "t", Value: []byte(`"/\`)}, `{"value":"\"/\\","topic":"t","partition":0,"offset":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendJSON(nil, &tt.in))
			if got != tt.want {
				t.Fatalf("AppendJSON:\n got %s\nwant %s", got, tt.want)
			}
			back, err := DecodeJSON([]byte(got))
			if err != nil {
				t.Fatal(err)
			}
			if again := string(AppendJSON(nil, &back)); again != got {
				t.Fatalf("round trip:\n got %s\nwant %s", again, got)
			}
		})
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"key":"a","key_b64":"YQ=="}`, "both key and key_b64"},
		{`{"valu":"x"}`, `unknown field "valu"`},
		{`{"value_b64":"!!"}`, "value_b64"},
		{`{"headers":{"a":1}}`, "value must be a string or null"},
		{`{"headers":7}`, "headers: want an object of name: value, or a list of {\"key\":...,\"value\":...}"},
		{`{"headers":[{"key":"a","val":"x"}]}`, `headers[0]: json: unknown field "val"`},
		{`{"headers":[{"value":"x"}]}`, `headers[0]: missing "key"`},
		{`{"headers":[{"key":"a","value":"x","value_b64":"eA=="}]}`, `headers[0]: both value and value_b64 are set`},
		{`{"headers":[],"headers_b64":{"x":"eA=="}}`, `headers_b64 cannot go with a list of headers`},
		{`{"timestamp":"yesterday"}`, "timestamp"},
		{`{"timestamp":true}`, "timestamp: want an RFC 3339 string or Unix milliseconds, got true"},
		{`{"timestamp":1.5}`, "timestamp: want an RFC 3339 string or Unix milliseconds, got 1.5"},
		{`{} {}`, "more than one"},
		{`{"offset":"1"}`, "offset"},
	}
	for _, tt := range tests {
		_, err := DecodeJSON([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("DecodeJSON(%s) = %v, want error containing %q", tt.in, err, tt.want)
		}
	}
}

// TestJSONForms: what the writer does not write but a person may
// read: a Unix-milliseconds timestamp, headers as a list.
func TestJSONForms(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"timestamp":1767225600123}`, `{"partition":0,"offset":-1,"timestamp":"2026-01-01T00:00:00.123Z"}`},
		{`{"timestamp":-1}`, `{"partition":0,"offset":-1}`},
		{`{"headers":[{"key":"a","value":"1"},{"key":"c","value":null},{"key":"b","value_b64":"/g=="}]}`,
			`{"headers":{"a":"1","c":null},"headers_b64":{"b":"/g=="},"partition":0,"offset":-1}`},
		{`{"headers":[{"key":"b","value_b64":"/g=="},{"key":"a"}]}`,
			`{"headers":[{"key":"b","value_b64":"/g=="},{"key":"a","value":null}],"partition":0,"offset":-1}`},
		{`{"headers":[]}`, `{"partition":0,"offset":-1}`},
	}
	for _, tt := range tests {
		r, err := DecodeJSON([]byte(tt.in))
		if err != nil {
			t.Errorf("DecodeJSON(%s): %v", tt.in, err)
			continue
		}
		if got := string(AppendJSON(nil, &r)); got != tt.want {
			t.Errorf("DecodeJSON(%s) then AppendJSON:\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
}

func TestReaderNamesLine(t *testing.T) {
	r := NewReader(strings.NewReader("{\"value\":\"a\"}\n\n{\"bad\":1}\n"), "in.jsonl")
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := r.Next()
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !strings.HasPrefix(err.Error(), "in.jsonl:3: ") {
		t.Fatalf("got %v, want in.jsonl:3 error", err)
	}
	if _, err := NewReader(strings.NewReader(""), "").Next(); err != io.EOF {
		t.Fatalf("empty: %v", err)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"key":"k","value":"v","headers":{"a":"b"},"partition":1,"offset":2,"timestamp":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"key_b64":"/wA=","headers_b64":{"x":"/g=="}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeJSON(b)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode to something that decodes to the same bytes.
		enc := AppendJSON(nil, &r)
		r2, err := DecodeJSON(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		if enc2 := AppendJSON(nil, &r2); !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
	})
}

func TestAppendJSONString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain/é\u2028\x7f", "\"plain/é\u2028\x7f\""},
		{"\"\\\n\r\t\b\f\x01\x1f", `"\"\\\n\r\t\b\f\u0001\u001f"`},
		{"bad\xffutf8", "\"bad\ufffdutf8\""},
		{"a\"b\\c\n\x01é\u2028<>&\xff", `"a\"b\\c\n\u0001é` + "\u2028" + `<>&` + "\uFFFD" + `"`},
		{"cut\xe2\x82", "\"cut\ufffd\ufffd\""},
		{"\ufffd\U0001F600", "\"\ufffd\U0001F600\""},
	}
	for _, tt := range tests {
		if got := string(AppendJSONString(nil, []byte(tt.in))); got != tt.want {
			t.Errorf("AppendJSONString([]byte(%q)) = %s, want %s", tt.in, got, tt.want)
		}
		if got := string(AppendJSONString(nil, tt.in)); got != tt.want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	// Both forms escape as encoding/json does, but for the characters it
	// escapes beyond the spec (<, >, &, U+2028, U+2029).
	for c := range 0x80 {
		in := string(rune(c))
		if strings.ContainsAny(in, "<>&") {
			continue
		}
		want, _ := json.Marshal(in)
		if got := AppendJSONString(nil, in); !bytes.Equal(got, want) {
			t.Errorf("AppendJSONString(%q) = %s, encoding/json %s", in, got, want)
		}
	}
	b := []byte("grüße, \"world\"\n")
	dst := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { dst = AppendJSONString(dst[:0], b) }); n != 0 {
		t.Errorf("AppendJSONString([]byte) allocates %v times", n)
	}
}
