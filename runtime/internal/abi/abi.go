// Package abi encodes request batches and decodes result batches in the
// binary layouts of streamd host ABI v1 (docs/abi.md sections 7 and 8).
//
// Encoding writes straight into a caller-provided buffer (the guest's input
// buffer); decoding makes one allocation for all output bytes plus one for
// the records and one for the headers of a whole batch.
package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// Op says what a guest does with a request batch.
type Op uint32

// The ops of ABI v1.
const (
	OpTransform Op = 1
	OpEncode    Op = 2
	OpDecode    Op = 3
	OpWrite     Op = 4
)

// Call statuses returned by streamd_manifest, streamd_init and
// streamd_process.
const (
	StatusOK          = 0
	StatusBatch       = 2
	StatusUnsupported = 3
	StatusConfig      = 4
	StatusInternal    = 5
)

// Per-record entry statuses in a result batch.
const (
	entryOK     = 0
	entryReject = 1
	keep        = 0xFFFFFFFF
)

// NoTimestamp is the timestamp_ms of a record without a timestamp.
const NoTimestamp = -1

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
	if n > math.MaxUint32 {
		return 0, ErrTooLarge
	}
	return n, nil
}

// EncodeRequest writes the request batch for op and recs into dst, which must
// be exactly RequestSize(recs) bytes long.
func EncodeRequest(dst []byte, op Op, recs []record.Record) {
	le.PutUint32(dst[0:], uint32(op))
	le.PutUint32(dst[4:], uint32(len(recs)))
	p := 8
	for i := range recs {
		r := &recs[i]
		start := p
		p += 4 // size, written below
		le.PutUint64(dst[p:], uint64(r.Offset))
		le.PutUint64(dst[p+8:], uint64(timestampMs(r.Timestamp)))
		le.PutUint32(dst[p+16:], uint32(r.Partition))
		p += 20
		p = putBytes(dst, p, r.Key)
		p = putBytes(dst, p, r.Value)
		le.PutUint32(dst[p:], uint32(len(r.Headers)))
		p += 4
		for j := range r.Headers {
			h := &r.Headers[j]
			le.PutUint32(dst[p:], uint32(len(h.Key)))
			p += 4
			p += copy(dst[p:], h.Key)
			p = putBytes(dst, p, h.Value)
		}
		le.PutUint32(dst[start:], uint32(p-start-4))
	}
}

func putBytes(dst []byte, p int, b []byte) int {
	if b == nil {
		le.PutUint32(dst[p:], math.MaxUint32) // -1
		return p + 4
	}
	le.PutUint32(dst[p:], uint32(len(b)))
	return p + 4 + copy(dst[p+4:], b)
}

func timestampMs(t time.Time) int64 {
	if t.IsZero() {
		return NoTimestamp
	}
	return t.UnixMilli()
}

// A MalformedError says where a result batch stopped making sense.
type MalformedError struct {
	Pos int
	Msg string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("malformed result batch at byte %d: %s", e.Pos, e.Msg)
}

// DecodeResult decodes a result batch for the request made of in. buf must
// be owned by the caller and never modified afterwards: output records and
// header names point into it. reject makes the error of a record the guest
// rejected (ERR_RECORD) from its reason.
//
// Output records get the Topic, Partition and Offset of the input record
// they came from; their timestamp is the one the guest wrote. A KEEP answer
// aliases the input: its Records is in[i:i+1], no copy.
func DecodeResult(buf []byte, in []record.Record, reject func(reason string) error) ([]plugins.Result, error) {
	d := decoder{buf: buf}
	count := d.u32("count")
	if d.err != nil {
		return nil, d.err
	}
	if int(count) != len(in) {
		return nil, &MalformedError{0, fmt.Sprintf("count %d, want %d", count, len(in))}
	}
	// First pass: validate and count records and headers, so the second
	// pass fills two exactly sized arrays.
	nrec, nhdr := 0, 0
	for i := 0; i < len(in) && d.err == nil; i++ {
		status := d.u32("entry status")
		switch {
		case d.err != nil:
		case status == entryOK:
			n := d.u32("out_count")
			if n == keep {
				continue
			}
			for j := uint32(0); j < n && d.err == nil; j++ {
				nhdr += d.skipRecord()
				nrec++
			}
		case status == entryReject:
			d.bytes("msg", d.u32("msg_len"))
		default:
			d.fail(d.p-4, fmt.Sprintf("entry %d: unknown status %d", i, status))
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.p != len(buf) {
		return nil, &MalformedError{d.p, fmt.Sprintf("%d bytes after the last entry", len(buf)-d.p)}
	}
	results := make([]plugins.Result, len(in))
	recs := make([]record.Record, nrec)
	var hdrs []record.Header
	if nhdr > 0 {
		hdrs = make([]record.Header, nhdr)
	}
	d.p = 4
	for i := range in {
		src := &in[i]
		if le.Uint32(buf[d.p:]) == entryReject {
			n := int(le.Uint32(buf[d.p+4:]))
			results[i].Err = reject(string(buf[d.p+8 : d.p+8+n]))
			d.p += 8 + n
			continue
		}
		n := le.Uint32(buf[d.p+4:])
		d.p += 8
		if n == keep {
			results[i].Records = in[i : i+1 : i+1]
			continue
		}
		out := recs[:n:n]
		recs = recs[n:]
		for j := range out {
			r := &out[j]
			p := d.p + 4 // skip size
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
					r.Headers[k].Key = unsafe.String(unsafe.SliceData(buf[p:]), kl)
					p += kl
					r.Headers[k].Value, p = getBytes(buf, p)
				}
			}
			d.p = p
		}
		results[i].Records = out
	}
	return results, nil
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
	if ms == NoTimestamp {
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
	n := d.u32(what + " length")
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
