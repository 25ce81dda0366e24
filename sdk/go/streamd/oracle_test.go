package streamd

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// describe renders decoded records, telling nil from empty, for comparing
// the new decoder with the old one.
func describe(recs []Record, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	bs := func(v []byte) string {
		if v == nil {
			return "nil"
		}
		return fmt.Sprintf("%q", v)
	}
	for _, r := range recs {
		fmt.Fprintf(&b, "o=%d t=%d p=%d k=%s v=%s h=%d[", r.Offset, r.Timestamp, r.Partition, bs(r.Key), bs(r.Value), len(r.Headers))
		if r.Headers == nil {
			b.WriteString("nil")
		}
		for _, h := range r.Headers {
			fmt.Fprintf(&b, "%q=%s ", h.Key, bs(h.Value))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// checkOracle decodes req (without its 8-byte head) with the new and the
// old decoder, twice each with one instance (the header name cache carries
// over), and requires the same records or error text; then it encodes the
// decoded records with both encoders and requires the same bytes.
func checkOracle(t *testing.T, req []byte, count uint32) {
	t.Helper()
	var p plugin
	var o oldDecoder
	for round := range 2 {
		got, gerr := p.decodeRequest(req, count)
		want, werr := o.decodeRequest(req, count)
		if g, w := describe(got, gerr), describe(want, werr); g != w {
			t.Fatalf("round %d: decoded\n%s\nwant (the old decoder)\n%s\nrequest %q", round, g, w, req)
		}
		if gerr != nil {
			return
		}
		var enc, old []byte
		for i := range got {
			enc = appendRecord(enc, &got[i])
			old = oldAppendRecord(old, &want[i])
		}
		if !bytes.Equal(enc, old) {
			t.Fatalf("round %d: encoded\n%q\nwant (the old encoder)\n%q", round, enc, old)
		}
	}
}

// batch encodes recs as a request's records (after its 8-byte head).
func batch(recs ...Record) []byte {
	return request(OpTransform, recs...)[8:]
}

func TestOracle(t *testing.T) {
	t.Run("lengths", func(t *testing.T) {
		// Every length 0-40 of key, value, header name and header value,
		// each next to the 8- and 16-byte boundaries of the word paths,
		// nil and empty.
		for n := 0; n <= 40; n++ {
			v := bytes.Repeat([]byte{'a' + byte(n%26)}, n)
			name := strings.Repeat("h", n)
			recs := []Record{
				{Key: v, Value: v, Headers: []Header{{Key: name, Value: v}}},
				{Key: nil, Value: []byte{}, Headers: []Header{{Key: name}, {Key: "x", Value: []byte{}}}},
				{Key: []byte{}, Value: nil},
			}
			checkOracle(t, batch(recs...), uint32(len(recs)))
		}
	})
	t.Run("names", func(t *testing.T) {
		// Header names of every length 0-24, and the same name with
		// one byte changed at every position, in consecutive records: the
		// name cache's word comparison must see every difference.
		for n := 0; n <= 24; n++ {
			base := []byte(strings.Repeat("n", n))
			recs := []Record{{Headers: []Header{{Key: string(base)}, {Key: string(base) + "2"}}}}
			for pos := range n {
				for _, c := range []byte{'m', 'o', 0, 0xff} {
					other := bytes.Clone(base)
					other[pos] = c
					recs = append(recs,
						Record{Headers: []Header{{Key: string(other)}, {Key: string(base) + "2"}}},
						Record{Headers: []Header{{Key: string(base)}, {Key: string(other) + "2"}}})
				}
			}
			checkOracle(t, batch(recs...), uint32(len(recs)))
		}
	})
	t.Run("prefixes", func(t *testing.T) {
		// Names that are prefixes of one another, of lengths 0-24, at the
		// same index in consecutive records, longest first and then
		// shortest first.
		var recs []Record
		for n := 24; n >= 0; n-- {
			recs = append(recs, Record{Headers: []Header{{Key: strings.Repeat("p", n)}}})
		}
		for n := 0; n <= 24; n++ {
			recs = append(recs, Record{Headers: []Header{{Key: strings.Repeat("p", n)}}})
		}
		checkOracle(t, batch(recs...), uint32(len(recs)))
	})
	t.Run("malformed", func(t *testing.T) {
		good := batch(Record{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{Key: "h", Value: []byte("x")}, {Key: "g"}}},
			Record{Value: []byte("second")})
		// Every truncation and every byte of the request set to 0x00,
		// 0x7f, 0x80 and 0xff (lengths, counts and sizes gone wrong).
		for i := 0; i <= len(good); i++ {
			checkOracle(t, good[:i], 2)
			checkOracle(t, good[:i], 1)
		}
		for i := range good {
			for _, c := range []byte{0, 0x7f, 0x80, 0xff, 1} {
				b := bytes.Clone(good)
				b[i] = c
				checkOracle(t, b, 2)
			}
		}
		checkOracle(t, append(bytes.Clone(good), 0), 2)
		checkOracle(t, good, 3)
		checkOracle(t, good, 1<<30)
	})
}

func FuzzOracle(f *testing.F) {
	f.Add(batch(Record{Key: []byte("key-000000000001"), Value: []byte(`{"a":1}`), Headers: []Header{{Key: "trace-id", Value: []byte("0123456789abcdef")}}}), uint32(1))
	f.Add(batch(Record{Headers: []Header{{Key: "fluid-schema-version", Value: []byte("2")}, {Key: "x"}}}, Record{Key: []byte{}}), uint32(2))
	f.Add(batch(), uint32(0))
	f.Fuzz(func(t *testing.T, req []byte, count uint32) {
		checkOracle(t, req, count%64)
	})
}
