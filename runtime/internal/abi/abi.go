// Package abi encodes request batches and decodes result batches in the
// binary layouts of streamd host ABI v1 (docs/abi.md sections 7 and 8).
//
// Encoding writes straight into a caller-provided buffer (the guest's input
// buffer) in one pass. Decoding allocates the results; KEEP answers alias
// the input records, and output records of a whole batch share one copy of
// the reply (or the reply itself, DecodeResultOwned) and a few arrays of
// records and of headers.
package abi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	wire "github.com/streamd/streamd/sdk/go/streamd/abi"
)

// The ABI's numbers (ops, statuses, entry codes) are sdk/go/streamd/abi's,
// the one source the Go guest SDK uses too.

var le = binary.LittleEndian

// ErrTooLarge is returned when a batch does not fit the 32-bit layout.
var ErrTooLarge = errors.New("batch larger than 4 GiB")

// RecordSize is the encoded size of r's body, without its size prefix.
func RecordSize(r *record.Record) int {
	n := 8 + 8 + 4 + 4 + len(r.Key) + 4 + len(r.Value) + 4
	for i := range r.Headers {
		n += 4 + len(r.Headers[i].Key) + 4 + len(r.Headers[i].Value)
	}
	return n
}

// RequestSize is the encoded size of a request batch of recs.
func RequestSize(recs []record.Record) (int, error) {
	n := 8
	for i := range recs {
		n += 4 + RecordSize(&recs[i])
	}
	if uint64(n) > math.MaxUint32 { // uint64: on 32-bit platforms the constant overflows int
		return 0, ErrTooLarge
	}
	return n, nil
}

// EncodeRequest writes the request batch for op and recs at the start of
// dst in one pass and returns its length. It returns ok false when dst is
// too short; dst then holds a partial batch, and RequestSize says how much
// room the batch needs.
//
// Each record costs one bounds check of its whole encoding against dst and
// one copy per byte field; there is no intermediate buffer and no per-field
// call. On amd64 and arm64 it stores through unsafe pointers
// (encode_unaligned.go); elsewhere it is encodePortable.
func EncodeRequest(dst []byte, op wire.Op, recs []record.Record) (n int, ok bool) {
	return encode(dst, op, recs)
}

// encodePortable is EncodeRequest in safe Go, for any byte order and
// alignment rule.
func encodePortable(dst []byte, op wire.Op, recs []record.Record) (n int, ok bool) {
	if !putBatchHead(dst, op, len(recs)) {
		return 0, false
	}
	p := 8
	for i := range recs {
		r := &recs[i]
		key, val, hdrs := r.Key, r.Value, r.Headers
		size, fit := fits(dst, p, r)
		if !fit {
			return p, false
		}
		// Every write of this record goes to b: records changed while
		// they are encoded (a caller's bug) cannot make it write past it.
		b := dst[p : p+4+size : p+4+size]
		p += 4 + size
		_ = b[31]
		le.PutUint32(b, uint32(size))
		le.PutUint64(b[4:], uint64(r.Offset))
		le.PutUint64(b[12:], uint64(toMs(r.Timestamp)))
		le.PutUint32(b[20:], uint32(r.Partition))
		q := 28
		if key == nil {
			le.PutUint32(b[24:], math.MaxUint32) // -1
		} else {
			le.PutUint32(b[24:], uint32(len(key)))
			q += copyShort(b[28:], key)
		}
		if val == nil {
			le.PutUint32(b[q:], math.MaxUint32)
			q += 4
		} else {
			le.PutUint32(b[q:], uint32(len(val)))
			q += 4 + copy(b[q+4:], val)
		}
		le.PutUint32(b[q:], uint32(len(hdrs)))
		q += 4
		for j := range hdrs {
			h := &hdrs[j]
			le.PutUint32(b[q:], uint32(len(h.Key)))
			q += 4 + copyShort(b[q+4:], unsafe.Slice(unsafe.StringData(h.Key), len(h.Key)))
			if h.Value == nil {
				le.PutUint32(b[q:], math.MaxUint32)
				q += 4
			} else {
				le.PutUint32(b[q:], uint32(len(h.Value)))
				q += 4 + copyShort(b[q+4:], h.Value)
			}
		}
	}
	return p, true
}

// putBatchHead writes the op and record count that open a request batch of
// n records at the start of dst; false when dst is shorter than that or n
// does not fit the count.
func putBatchHead(dst []byte, op wire.Op, n int) bool {
	if len(dst) < 8 || uint64(n) > math.MaxUint32 {
		return false
	}
	le.PutUint32(dst, uint32(op))
	le.PutUint32(dst[4:], uint32(n))
	return true
}

// fits returns the size of r's body and whether r, with its size prefix,
// fits in dst at p and within the batch's 32-bit sizes.
func fits(dst []byte, p int, r *record.Record) (size int, ok bool) {
	size = RecordSize(r)
	return size, size <= len(dst)-p-4 && uint64(p+4+size) <= math.MaxUint32
}

// toMs is the timestamp_ms of t, the inverse of fromMs.
func toMs(t time.Time) int64 {
	if t.IsZero() {
		return wire.NoTimestamp
	}
	return t.UnixMilli()
}

// copyShort is copy(dst, src) that moves 8 to 16 bytes as two overlapping
// words instead of calling memmove.
func copyShort(dst, src []byte) int {
	if n := len(src); n >= 8 && n <= 16 && len(dst) >= n {
		le.PutUint64(dst, le.Uint64(src))
		le.PutUint64(dst[n-8:], le.Uint64(src[n-8:]))
		return n
	}
	return copy(dst, src)
}

// A MalformedError says where a result batch stopped making sense.
type MalformedError struct {
	Pos int
	Msg string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("malformed result batch at byte %d: %s", e.Pos, e.Msg)
}

// keepEntry is the 8 bytes of a KEEP entry (status 0, out_count
// 0xFFFFFFFF) read as one little-endian uint64.
const keepEntry = uint64(wire.Keep) << 32

// DecodeResult decodes a result batch for the request made of in. It does
// not keep buf: the caller may reuse it as soon as DecodeResult returns.
// reject makes the error of a record the guest rejected (ERR_RECORD) from
// its reason.
//
// A KEEP answer aliases the input: its Records is in[i:i+1], no copy. A
// batch answered only with KEEP, ERR_RECORD or no records allocates nothing
// but the results. Output records get the Topic, Partition and Offset of
// the input record they came from and the timestamp the guest wrote; all
// their byte fields and header names share one copy of buf, their headers
// one array and the records one array.
func DecodeResult(buf []byte, in []record.Record, reject func(reason string) error) ([]plugins.Result, error) {
	res, _, err := decodeResult(buf, in, reject, false)
	return res, err
}

// DecodeResultOwned is DecodeResult for a caller that gives buf up: the
// output records point into buf itself instead of a copy of it. kept says
// whether they do (the batch had output records); the caller must then not
// write to buf again. When kept is false nothing refers to buf.
//
// A batch that starts with entries of one output record each with as many
// headers as the first (a transform that changes every record) is decoded
// in one pass on amd64 and arm64, into arrays of records and headers sized
// for all of its entries being so; from the first other entry on, the
// records go to arrays of their exact size. Those arrays are never larger
// than an all-uniform batch of the same length needs, and no larger than
// the reply allows.
func DecodeResultOwned(buf []byte, in []record.Record, reject func(reason string) error) (res []plugins.Result, kept bool, err error) {
	return decodeResult(buf, in, reject, true)
}

func decodeResult(buf []byte, in []record.Record, reject func(reason string) error, owned bool) ([]plugins.Result, bool, error) {
	if len(buf) < 4 || uint64(le.Uint32(buf)) != uint64(len(in)) {
		return decodeResultChecked(buf, in, reject, owned)
	}
	results := make([]plugins.Result, len(in))
	// The leading KEEP entries (a filter's, all of a batch kept as it is)
	// are answered in one pass; given buf, so are leading entries that
	// answer one record each, as a transform that changes every record
	// does (amd64 and arm64; none elsewhere). The rest, from the first
	// other entry on, is checked and then decoded.
	i, p := 0, 4
	for i < len(in) && len(buf)-p >= 8 && le.Uint64(buf[p:]) == keepEntry {
		results[i].Records = in[i : i+1 : i+1]
		i++
		p += 8
	}
	uniform := 0
	if owned && i == 0 {
		uniform, p = fillUniform(buf, in, results)
		i = uniform
	}
	nrec, nhdr, ok := scan(buf, p, len(in)-i)
	if !ok {
		// The checked decoder says where and why the batch is malformed.
		return decodeResultChecked(buf, in, reject, owned)
	}
	if nrec > 0 && !owned {
		buf = bytes.Clone(buf)
	}
	// An entry of no records has an empty Records, not nil, when the batch
	// has output records (decodeResultChecked cuts it from their array).
	var recs []record.Record
	if nrec > 0 {
		recs = make([]record.Record, nrec)
	} else if uniform > 0 {
		recs = []record.Record{}
	}
	fill(buf, p, in[i:], results[i:], reject, recs, nhdr)
	return results, uniform > 0 || nrec > 0, nil
}

// scanPortable reports whether buf from p on holds n well-formed entries of
// a result batch and nothing else, and counts their output records and the
// records' headers: the check before fill in safe Go (scan is it but on
// amd64 and arm64, decode_unaligned.go). It accepts exactly the batches decodeResultChecked
// accepts (TestDecodeImplementations and FuzzDecodeImplementations check
// that) but keeps its position in a local, has no error to carry from field
// to field and bounds every field of an output record by the record's size,
// read first: a record's fields are well formed only if they end exactly at
// its end, so they can be bounded by it rather than by the whole batch.
func scanPortable(buf []byte, p, n int) (nrec, nhdr int, ok bool) {
	for range n {
		if len(buf)-p < 8 {
			return 0, 0, false
		}
		e := le.Uint64(buf[p:])
		p += 8
		if e == keepEntry {
			continue
		}
		status, count := uint32(e), uint32(e>>32)
		switch status {
		case wire.EntryReject:
			if uint64(count) > uint64(len(buf)-p) {
				return 0, 0, false
			}
			p += int(count)
		case wire.EntryOK:
			for range count {
				if len(buf)-p < 4 {
					return 0, 0, false
				}
				size := le.Uint32(buf[p:])
				p += 4
				if size < 20 || uint64(size) > uint64(len(buf)-p) {
					return 0, 0, false
				}
				// The fields after offset, timestamp and partition.
				b := buf[p+20 : p+int(size)]
				p += int(size)
				hc, ok := scanFields(b)
				if !ok {
					return 0, 0, false
				}
				nrec++
				nhdr += hc
			}
		default:
			return 0, 0, false
		}
	}
	return nrec, nhdr, p == len(buf)
}

// scanFields reports whether b is exactly the key, value, header count and
// headers of an output record, and returns the header count.
func scanFields(b []byte) (hc int, ok bool) {
	q, ok := skipNullable(b, 0)
	if !ok {
		return 0, false
	}
	if q, ok = skipNullable(b, q); !ok || len(b)-q < 4 {
		return 0, false
	}
	h := le.Uint32(b[q:])
	q += 4
	// Each header takes at least 8 bytes: a count the rest cannot hold is
	// wrong, and this bounds the loop and the count (<= MaxInt32).
	if uint64(h) > uint64(len(b)-q)/8 {
		return 0, false
	}
	for range h {
		if len(b)-q < 4 {
			return 0, false
		}
		kl := le.Uint32(b[q:])
		q += 4
		if uint64(kl) > uint64(len(b)-q) {
			return 0, false
		}
		q += int(kl)
		if q, ok = skipNullable(b, q); !ok {
			return 0, false
		}
	}
	return int(h), q == len(b)
}

// skipNullable returns the position after the nullable length-prefixed
// field at b[q:] (a length of -1 is null), or false when it is not there:
// short, past the end of b or of another negative length.
func skipNullable(b []byte, q int) (int, bool) {
	if len(b)-q < 4 {
		return 0, false
	}
	l := le.Uint32(b[q:])
	q += 4
	if l == math.MaxUint32 {
		return q, true
	}
	if uint64(l) > uint64(len(b)-q) { // a negative length (> MaxInt32) is past the end too
		return 0, false
	}
	return q + int(l), true
}

// fillPortable answers the entries of buf from p on, for in and results,
// which scan accepted with len(recs) output records holding nhdr headers in
// all: KEEP aliases the input, ERR_RECORD is reject's error, and output
// records go to recs and an exactly sized array of headers and point into
// buf.
func fillPortable(buf []byte, p int, in []record.Record, results []plugins.Result, reject func(string) error, recs []record.Record, nhdr int) {
	var hdrs []record.Header
	if nhdr > 0 {
		hdrs = make([]record.Header, nhdr)
	}
	in = in[:len(results)]
	for i := range results {
		e := le.Uint64(buf[p:])
		p += 8
		if e == keepEntry {
			results[i].Records = in[i : i+1 : i+1]
			continue
		}
		n := int(e >> 32)
		if uint32(e) == wire.EntryReject {
			results[i].Err = reject(string(buf[p : p+n]))
			p += n
			continue
		}
		src := &in[i]
		out := recs[:n:n]
		recs = recs[n:]
		for j := range out {
			size := int(le.Uint32(buf[p:]))
			b := buf[p+4 : p+4+size]
			p += 4 + size
			r := &out[j]
			r.Offset, r.Partition, r.Topic = src.Offset, src.Partition, src.Topic
			r.Timestamp = fromMs(int64(le.Uint64(b[8:])))
			q := 20
			r.Key, q = getBytes(b, q)
			r.Value, q = getBytes(b, q)
			hc := int(le.Uint32(b[q:]))
			q += 4
			if hc > 0 {
				h := hdrs[:hc:hc]
				hdrs = hdrs[hc:]
				r.Headers = h
				for k := range h {
					kl := int(le.Uint32(b[q:]))
					q += 4
					if kl > 0 {
						h[k].Key = unsafe.String(&b[q], kl)
					}
					q += kl
					h[k].Value, q = getBytes(b, q)
				}
			}
		}
		results[i].Records = out
	}
}

// decodeResultChecked is the decoder that checks every field as it reads
// it and knows what is wrong where: decodeResult's answer for a batch that
// scan does not accept.
func decodeResultChecked(buf []byte, in []record.Record, reject func(reason string) error, owned bool) ([]plugins.Result, bool, error) {
	if len(buf) < 4 {
		return nil, false, &MalformedError{0, "short count"}
	}
	if count := le.Uint32(buf); uint64(count) != uint64(len(in)) {
		return nil, false, &MalformedError{0, fmt.Sprintf("count %d, want %d", count, len(in))}
	}
	results := make([]plugins.Result, len(in))
	// One pass validates every entry and answers KEEP and ERR_RECORD; it
	// counts output records and headers so that a second pass, only when
	// there are output records, fills exactly sized arrays.
	p, nrec, nhdr := 4, 0, 0
	for i := range in {
		if len(buf)-p >= 8 && le.Uint64(buf[p:]) == keepEntry {
			results[i].Records = in[i : i+1 : i+1]
			p += 8
			continue
		}
		var err error
		if p, err = decodeEntry(buf, p, i, in, results, reject, &nrec, &nhdr); err != nil {
			return nil, false, err
		}
	}
	if p != len(buf) {
		return nil, false, &MalformedError{p, fmt.Sprintf("%d bytes after the last entry", len(buf)-p)}
	}
	if nrec == 0 {
		return results, false, nil
	}
	if !owned {
		buf = bytes.Clone(buf)
	}
	decodeRecords(buf, in, results, nrec, nhdr)
	return results, true, nil
}

// decodeEntry validates the entry for in[i] at buf[p:], answers KEEP and
// ERR_RECORD in results[i], counts output records and their headers into
// nrec and nhdr, and returns the position after the entry.
func decodeEntry(buf []byte, p, i int, in []record.Record, results []plugins.Result, reject func(string) error, nrec, nhdr *int) (int, error) {
	d := decoder{buf: buf, p: p}
	status := d.u32("entry status")
	switch {
	case d.err != nil:
	case status == wire.EntryOK:
		n := d.u32("out_count")
		if n == wire.Keep {
			results[i].Records = in[i : i+1 : i+1]
			break
		}
		for j := uint32(0); j < n && d.err == nil; j++ {
			*nhdr += d.skipRecord()
			*nrec++
		}
	case status == wire.EntryReject:
		start := d.p + 4
		d.bytes("msg", d.u32("msg_len"))
		if d.err == nil {
			results[i].Err = reject(string(buf[start:d.p]))
		}
	default:
		d.fail(d.p-4, fmt.Sprintf("entry %d: unknown status %d", i, status))
	}
	return d.p, d.err
}

// decodeRecords fills the output records of results from buf, a result
// batch that DecodeResult validated and that holds nrec output records with
// nhdr headers in all.
func decodeRecords(buf []byte, in []record.Record, results []plugins.Result, nrec, nhdr int) {
	recs := make([]record.Record, nrec)
	var hdrs []record.Header
	if nhdr > 0 {
		hdrs = make([]record.Header, nhdr)
	}
	p := 4
	for i := range in {
		status, n := le.Uint32(buf[p:]), le.Uint32(buf[p+4:])
		p += 8
		switch {
		case status == wire.EntryReject:
			p += int(n)
			continue
		case n == wire.Keep:
			continue
		}
		src := &in[i]
		out := recs[:n:n]
		recs = recs[n:]
		for j := range out {
			r := &out[j]
			p += 4 // size
			r.Timestamp = fromMs(int64(le.Uint64(buf[p+8:])))
			r.Topic, r.Partition, r.Offset = src.Topic, src.Partition, src.Offset
			p += 20
			r.Key, p = getBytes(buf, p)
			r.Value, p = getBytes(buf, p)
			hc := int(le.Uint32(buf[p:]))
			p += 4
			if hc > 0 {
				r.Headers = hdrs[:hc:hc]
				hdrs = hdrs[hc:]
				for k := range r.Headers {
					kl := int(le.Uint32(buf[p:]))
					p += 4
					if kl > 0 {
						r.Headers[k].Key = unsafe.String(&buf[p], kl)
					}
					p += kl
					r.Headers[k].Value, p = getBytes(buf, p)
				}
			}
		}
		results[i].Records = out
	}
}

func getBytes(buf []byte, p int) ([]byte, int) {
	n := int32(le.Uint32(buf[p:]))
	p += 4
	if n < 0 {
		return nil, p
	}
	return buf[p : p+int(n) : p+int(n)], p + int(n)
}

func fromMs(ms int64) time.Time {
	if ms == wire.NoTimestamp {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

type decoder struct {
	buf []byte
	p   int
	err error
}

func (d *decoder) fail(pos int, msg string) {
	if d.err == nil {
		d.err = &MalformedError{pos, msg}
	}
}

func (d *decoder) u32(what string) uint32 {
	if d.err != nil {
		return 0
	}
	if len(d.buf)-d.p < 4 {
		d.fail(d.p, "short "+what)
		return 0
	}
	v := le.Uint32(d.buf[d.p:])
	d.p += 4
	return v
}

// length reads the 4-byte length of the field what. It is u32(what+"
// length") without building that string for every field it reads: the
// message is made only when the length is short (the concatenation was
// ~2% of a C guest call's CPU, plus its garbage).
func (d *decoder) length(what string) uint32 {
	if d.err != nil {
		return 0
	}
	if len(d.buf)-d.p < 4 {
		d.fail(d.p, "short "+what+" length")
		return 0
	}
	v := le.Uint32(d.buf[d.p:])
	d.p += 4
	return v
}

func (d *decoder) bytes(what string, n uint32) {
	if d.err != nil {
		return
	}
	if uint64(len(d.buf)-d.p) < uint64(n) {
		d.fail(d.p, fmt.Sprintf("%s length %d past the end", what, n))
		return
	}
	d.p += int(n)
}

// nullableBytes skips a length-prefixed field where -1 means null.
func (d *decoder) nullableBytes(what string) {
	n := d.length(what)
	if d.err != nil || n == math.MaxUint32 {
		return
	}
	if n > math.MaxInt32 {
		d.fail(d.p-4, fmt.Sprintf("%s length %d is negative", what, int32(n)))
		return
	}
	d.bytes(what, n)
}

// skipRecord validates one output record and returns its header count.
func (d *decoder) skipRecord() int {
	start := d.p
	size := d.u32("record size")
	if d.err != nil {
		return 0
	}
	body := d.p
	if uint64(len(d.buf)-d.p) < uint64(size) {
		d.fail(start, fmt.Sprintf("record size %d past the end", size))
		return 0
	}
	if size < 20 {
		d.fail(start, fmt.Sprintf("record size %d too small", size))
		return 0
	}
	d.p += 20
	d.nullableBytes("key")
	d.nullableBytes("value")
	hc := d.u32("header_count")
	for k := uint32(0); k < hc && d.err == nil; k++ {
		d.bytes("header name", d.u32("header name length"))
		d.nullableBytes("header value")
	}
	if d.err == nil && d.p-body != int(size) {
		d.fail(start, fmt.Sprintf("record size %d but its fields take %d", size, d.p-body))
	}
	if hc > math.MaxInt32 {
		d.fail(start, "header count too large")
	}
	return int(hc)
}
