package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHeaderFixtures(t *testing.T) {
	tests := []struct {
		file string
		want Header
	}{
		{"header-append-json.json", Header{Kind: KindAppend, From: 7, To: 10, Origin: "host-1", Version: "4.1.0", PayloadType: "json", Metadata: json.RawMessage(`{"tenant":"t1","n":[1,2]}`)}},
		{"header-append-binary.json", Header{Kind: KindAppend, From: 1, To: 1, PayloadType: "binary"}},
		{"header-append-legacy.json", Header{Kind: KindAppend, From: 3, To: 4, Origin: "old", PayloadType: "json", Legacy: true}},
		{"header-delete.json", Header{Kind: KindDelete, To: 42, Origin: "host-1", Version: "4.1.0"}},
		{"header-purge-empty.json", Header{Kind: KindPurge}},
		{"header-purge.json", Header{Kind: KindPurge, Version: "4.1.0"}},
		{"header-mark.json", Header{Kind: KindMark, ID: "8c3e5a1f-6f7e-4a55-9a4f-0d1f2b3c4d5e", Origin: "host-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			in := read(t, tt.file)
			h, err := DecodeHeader(in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h, tt.want) {
				t.Fatalf("decoded %+v, want %+v", h, tt.want)
			}
			out, err := EncodeHeader(h)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, in) {
				t.Fatalf("re-encoded\n%s\nwant\n%s", out, in)
			}
		})
	}
}

func TestHeaderLenient(t *testing.T) {
	tests := []struct {
		in   string
		want Header
	}{
		// Pretty-printed, unknown extra fields, null optionals.
		{"{ \"delete\" : { \"to\" : 3, \"origin\": null, \"x\": 1 } }", Header{Kind: KindDelete, To: 3}},
		// Unknown action names are skipped, not errors.
		{`{"snapshot":{"to":1}}`, Header{Kind: KindUnknown}},
		{`{}`, Header{Kind: KindUnknown}},
		// A non-object under a known name is not that action.
		{`{"append":1,"purge":{}}`, Header{Kind: KindPurge}},
		// A metadata that is not an object means empty.
		{`{"append":{"range":{"from":1,"to":1},"payloadType":"json","metadata":7}}`, Header{Kind: KindAppend, From: 1, To: 1, PayloadType: "json"}},
	}
	for _, tt := range tests {
		h, err := DecodeHeader([]byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(h, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.in, h, tt.want)
		}
	}
}

func TestHeaderMalformed(t *testing.T) {
	tests := []struct{ in, errHas string }{
		{``, "not a JSON object"},
		{`[1]`, "not a JSON object"},
		{`{"append":{"payloadType":"json"}}`, "missing range"},
		{`{"append":{"range":{"from":5,"to":1},"payloadType":"json"}}`, "from 5 > to 1"},
		{`{"append":{"range":{"from":0,"to":1},"payloadType":"json"}}`, "not a seqNr"},
		{`{"append":{"range":{"from":1,"to":1},"payloadType":"text"}}`, `payloadType "text"`},
		{`{"append":{"range":{"from":1,"to":1}}}`, `payloadType ""`},
		{`{"delete":{"to":"3"}}`, "to is not an integer"},
		{`{"delete":{}}`, "missing to"},
		{`{"mark":{"id":5}}`, "id is not a string"},
		{`{"purge":{"origin":5}}`, "origin is not a string"},
	}
	for _, tt := range tests {
		_, err := DecodeHeader([]byte(tt.in))
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%q: error %v, want one with %q", tt.in, err, tt.errHas)
		}
	}
}

func TestPayloadFixtures(t *testing.T) {
	evBinary := Event{SeqNr: 7, Tags: []string{"orders", "eu"}, Kind: PayloadBinary, Payload: []byte{0, 1, 2, 255}}
	evJSON := Event{SeqNr: 8, Kind: PayloadJSON, Payload: []byte(`{"total":12.5,"items":["a","b"]}`)}
	tests := []struct {
		file, format string
		want         Events
	}{
		{"payload-json.json", FormatJSON, Events{
			Events: []Event{
				{SeqNr: 7, Tags: []string{"orders", "eu"}, Kind: PayloadJSON, Payload: []byte(`{"total":12.5,"items":["a","b"]}`)},
				{SeqNr: 8, Kind: PayloadText, Payload: []byte("line\nwith \"quotes\" and ünïcode")},
				{SeqNr: 9, Tags: []string{"x"}},
			},
			Metadata: Metadata{ExpireAfter: 24 * time.Hour, ExpireAfterRaw: json.RawMessage(`"1 day"`), Data: json.RawMessage(`{"tenant":"t1"}`)},
		}},
		{"payload-json-v0.json", FormatJSON, Events{Events: []Event{{SeqNr: 1, Kind: PayloadJSON, Payload: []byte(`"payload"`)}}, Legacy: true}},
		{"payload-json-nometa.json", FormatJSON, Events{Events: []Event{{SeqNr: 1, Tags: []string{"a"}, Kind: PayloadJSON, Payload: []byte(`[1,2,3]`)}}}},
		{"payload-binary-v1.bin", FormatBinary, Events{
			Events: []Event{
				evBinary, evJSON,
				{SeqNr: 9, Tags: []string{"x"}, Kind: PayloadText, Payload: []byte("naïve text")},
				{SeqNr: 10},
			},
			Metadata: Metadata{ExpireAfter: 2 * time.Hour, ExpireAfterRaw: json.RawMessage(`"2 hours"`), Data: json.RawMessage(`{"tenant":"t1"}`)},
		}},
		{"payload-binary-v1-nometa.bin", FormatBinary, Events{Events: []Event{evBinary}}},
		{"payload-binary-v0.bin", FormatBinary, Events{Events: []Event{evBinary, evJSON}, Legacy: true}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			in := read(t, tt.file)
			e, err := DecodePayload(tt.format, in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*e, tt.want) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", *e, tt.want)
			}
			out, err := EncodePayloadAs(e, tt.format)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, in) {
				t.Fatalf("re-encoded\n%q\nwant\n%q", out, in)
			}
			if tt.format == FormatBinary && e.Format() == FormatBinary {
				out2, f, err := EncodePayload(e)
				if err != nil || f != FormatBinary || !bytes.Equal(out2, in) {
					t.Fatalf("EncodePayload chose %q (err %v)", f, err)
				}
			}
		})
	}
}

func TestPayloadMalformed(t *testing.T) {
	v1 := read(t, "payload-binary-v1.bin")
	tests := []struct {
		format string
		in     []byte
		errHas string
	}{
		{FormatJSON, []byte(`{"events":[]}`), "no events"},
		{FormatJSON, []byte(`{"events":[{"tags":[]}]}`), "missing seqNr"},
		{FormatJSON, []byte(`{"events":[{"seqNr":1,"payloadType":"text","payload":1}]}`), "text payload is not a string"},
		{FormatJSON, []byte(`{"events":[{"seqNr":1,"payloadType":"binary","payload":"AA=="}]}`), `payloadType "binary"`},
		{FormatJSON, []byte(`{"events":[{"seqNr":1}],"metadata":{"expireAfter":"1 fortnight"}}`), "unknown unit"},
		{FormatJSON, []byte(`{"events":[{"seqNr":1}],"metadata":[]}`), "metadata is not a JSON object"},
		{FormatBinary, nil, "empty"},
		{FormatBinary, v1[:20], "need"},
		{FormatBinary, []byte{1, 0, 0, 0, 0}, "no events"},
		{FormatBinary, []byte{1, 0xff, 0xff, 0xff, 0xff}, "negative length"},
		{FormatBinary, append(append([]byte{}, v1[:len(v1)-3]...), "xx"...), "metadata is not a JSON object"},
		{"text", []byte(`x`), "unknown payloadType"},
	}
	for _, tt := range tests {
		_, err := DecodePayload(tt.format, tt.in)
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s %q: error %v, want one with %q", tt.format, tt.in, err, tt.errHas)
		}
	}
}

func TestExpireAfterMillis(t *testing.T) {
	e, err := DecodePayload(FormatJSON, []byte(`{"events":[{"seqNr":1}],"metadata":{"expireAfter":90000}}`))
	if err != nil {
		t.Fatal(err)
	}
	if e.Metadata.ExpireAfter != 90*time.Second {
		t.Fatalf("expireAfter %v, want 1m30s", e.Metadata.ExpireAfter)
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		out  string
	}{
		{"1 day", 24 * time.Hour, "1 day"},
		{"2 days", 48 * time.Hour, "2 days"},
		{"36 hours", 36 * time.Hour, "36 hours"},
		{"90 minutes", 90 * time.Minute, "90 minutes"},
		{"1m", time.Minute, "1 minute"},
		{"30s", 30 * time.Second, "30 seconds"},
		{"1500 ms", 1500 * time.Millisecond, "1500 milliseconds"},
		{"1.5 h", 90 * time.Minute, "90 minutes"},
		{"7 nanos", 7, "7 nanoseconds"},
	}
	for _, tt := range tests {
		d, err := ParseDuration(tt.in)
		if err != nil || d != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, d, err, tt.want)
		}
		if got := FormatDuration(d); got != tt.out {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, tt.out)
		}
	}
	for _, bad := range []string{"", "day", "1 fortnight", "-1 day", "x s"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q): no error", bad)
		}
	}
}

func FuzzDecodeHeader(f *testing.F) {
	files, _ := filepath.Glob("testdata/header-*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(`{"append":{"range":{"from":1,"to":2},"payloadType":"json","metadata":{"data":null}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil || h.Kind == KindUnknown {
			return
		}
		out, err := EncodeHeader(h)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", h, err)
		}
		h2, err := DecodeHeader(out)
		if err != nil {
			t.Fatalf("re-decode %s: %v", out, err)
		}
		if !reflect.DeepEqual(h, h2) {
			t.Fatalf("round trip changed %+v to %+v", h, h2)
		}
		out2, _ := EncodeHeader(h2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("encoding not stable: %s vs %s", out, out2)
		}
	})
}

func FuzzDecodePayload(f *testing.F) {
	files, _ := filepath.Glob("testdata/payload-*")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		format := FormatJSON
		if strings.HasSuffix(p, ".bin") {
			format = FormatBinary
		}
		f.Add(format == FormatBinary, b)
	}
	f.Fuzz(func(t *testing.T, binary bool, b []byte) {
		format := FormatJSON
		if binary {
			format = FormatBinary
		}
		e, err := DecodePayload(format, b)
		if err != nil {
			return
		}
		out, err := EncodePayloadAs(e, format)
		if err != nil {
			t.Fatalf("decoded payload does not encode: %v", err)
		}
		e2, err := DecodePayload(format, out)
		if err != nil {
			t.Fatalf("re-decode: %v\n%q", err, out)
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("round trip changed\n%+v\n%+v", e, e2)
		}
	})
}
