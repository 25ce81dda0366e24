package record

import (
	"bytes"
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
		{"headers keep order and repeats", Record{Headers: []Header{{"b", []byte("1")}, {"a", nil}, {"b", []byte("2")}, {"x", []byte{0xfe}}}},
			`{"headers":{"b":"1","a":null,"b":"2"},"headers_b64":{"x":"/g=="},"partition":0,"offset":0}`},
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
		{`{"headers":[]}`, "want an object"},
		{`{"timestamp":"yesterday"}`, "timestamp"},
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
	}
	for _, tt := range tests {
		if got := string(AppendJSONString(nil, []byte(tt.in))); got != tt.want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
