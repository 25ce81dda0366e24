package streamd

// The request decoder and the record encoder as they were before the
// per-record paths were rewritten without calls,
// frozen as the oracle of TestOracle and FuzzOracle: the new code must
// decode every request to the same records, or fail with the same error
// text, and encode every record to the same bytes.

import (
	"errors"
	"math"

	"github.com/streamd/streamd/sdk/go/streamd/abi"
)

var errOldShort = errors.New("record body too short")

// oldDecoder holds the slabs and the header name cache of the old decoder.
type oldDecoder struct {
	recs  []Record
	hdrs  []Header
	names []string
}

func (p *oldDecoder) name(j int, b []byte) string {
	if j < len(p.names) && p.names[j] == string(b) {
		return p.names[j]
	}
	s := string(b)
	if j < len(p.names) {
		p.names[j] = s
	} else if j == len(p.names) && j < 64 {
		p.names = append(p.names, s)
	}
	return s
}

// oldLE is the old code's little-endian helper (the SDK's le, which the new
// code no longer uses on its per-record paths).
var oldLE littleEndian

// decodeRequest decodes count records; they point into b. Records and
// headers live in slabs reused from call to call.
func (p *oldDecoder) decodeRequest(b []byte, count uint32) ([]Record, error) {
	if uint64(count) > uint64(len(b)/4) {
		return nil, errors.New("request count " + itoa(int(count)) + " too large for " + itoa(len(b)) + " bytes")
	}
	if uint32(cap(p.recs)) < count {
		p.recs = make([]Record, count)
	}
	recs := p.recs[:count]
	hdrs := p.hdrs[:0]
	pos := 8
	for i := range recs {
		if len(b) < 4 {
			return nil, errors.New("record " + itoa(i) + ": short size at byte " + itoa(pos))
		}
		size := oldLE.Uint32(b)
		if uint64(size) > uint64(len(b)-4) {
			return nil, errors.New("record " + itoa(i) + ": size " + itoa(int(size)) + " past the end at byte " + itoa(pos))
		}
		var err error
		if hdrs, err = p.decodeBody(&recs[i], b[4:4+size], hdrs); err != nil {
			return nil, errors.New("record " + itoa(i) + " at byte " + itoa(pos) + ": " + err.Error())
		}
		b = b[4+size:]
		pos += 4 + int(size)
	}
	if len(b) != 0 {
		return nil, errors.New(itoa(len(b)) + " bytes after the last record")
	}
	// Headers were appended to one slab that may have moved while growing:
	// point each record at its part by count.
	k := 0
	for i := range recs {
		if n := len(recs[i].Headers); n > 0 {
			recs[i].Headers = hdrs[k : k+n : k+n]
			k += n
		}
	}
	p.hdrs = hdrs
	return recs, nil
}

// decodeBody decodes one record body into r, appending its headers to hdrs.
func (p *oldDecoder) decodeBody(r *Record, b []byte, hdrs []Header) ([]Header, error) {
	if len(b) < 32 {
		return hdrs, errOldShort
	}
	r.Offset = int64(oldLE.Uint64(b))
	r.Timestamp = int64(oldLE.Uint64(b[8:]))
	r.Partition = int32(oldLE.Uint32(b[16:]))
	b = b[20:]
	var ok bool
	if r.Key, b, ok = oldNullable(b); !ok {
		return hdrs, errors.New("bad key length")
	}
	if r.Value, b, ok = oldNullable(b); !ok {
		return hdrs, errors.New("bad value length")
	}
	if len(b) < 4 {
		return hdrs, errOldShort
	}
	hc := oldLE.Uint32(b)
	b = b[4:]
	if uint64(hc) > uint64(len(b)/8) {
		return hdrs, errors.New("header count " + itoa(int(hc)) + " too large")
	}
	start := len(hdrs)
	for j := 0; j < int(hc); j++ {
		if len(b) < 4 {
			return hdrs, errOldShort
		}
		kl := oldLE.Uint32(b)
		if uint64(kl) > uint64(len(b)-4) {
			return hdrs, errors.New("bad header name length")
		}
		var h Header
		h.Key = p.name(j, b[4:4+kl])
		if h.Value, b, ok = oldNullable(b[4+kl:]); !ok {
			return hdrs, errors.New("bad header value length")
		}
		hdrs = append(hdrs, h)
	}
	if len(b) != 0 {
		return hdrs, errors.New(itoa(len(b)) + " bytes after the last header")
	}
	// decodeRequest points Headers into the final slab by their count.
	r.Headers = nil
	if hc > 0 {
		r.Headers = hdrs[start:len(hdrs):len(hdrs)]
	}
	return hdrs, nil
}

func oldNullable(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := int32(oldLE.Uint32(b))
	b = b[4:]
	if n == -1 {
		return nil, b, true
	}
	if n < 0 || int(n) > len(b) {
		return nil, b, false
	}
	return b[:n:n], b[n:], true
}

func oldAppendRecord(out []byte, r *Record) []byte {
	size := 8 + 8 + 4 + 4 + len(r.Key) + 4 + len(r.Value) + 4
	for i := range r.Headers {
		size += 4 + len(r.Headers[i].Key) + 4 + len(r.Headers[i].Value)
	}
	out = oldLE.AppendUint32(out, uint32(size))
	out = oldLE.AppendUint64(out, math.MaxUint64) // offset -1
	out = oldLE.AppendUint64(out, uint64(r.Timestamp))
	out = oldLE.AppendUint32(out, math.MaxUint32) // partition -1
	out = oldAppendNullable(out, r.Key)
	out = oldAppendNullable(out, r.Value)
	out = oldLE.AppendUint32(out, uint32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		out = oldLE.AppendUint32(out, uint32(len(h.Key)))
		out = append(out, h.Key...)
		out = oldAppendNullable(out, h.Value)
	}
	return out
}

func oldAppendNullable(out, b []byte) []byte {
	if b == nil {
		return oldLE.AppendUint32(out, abi.Null)
	}
	out = oldLE.AppendUint32(out, uint32(len(b)))
	return append(out, b...)
}
