//go:build amd64 || arm64

package abi

import (
	"math"
	"unsafe"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	wire "github.com/streamd/streamd/sdk/go/streamd/abi"
)

// u32 and u64 load the little-endian word at buf's base+p, which the
// caller checked is within buf.
func u32(base unsafe.Pointer, p int) uint32 { return *(*uint32)(unsafe.Add(base, p)) }
func u64(base unsafe.Pointer, p int) uint64 { return *(*uint64)(unsafe.Add(base, p)) }

// scan is scanPortable for little-endian machines that load words at any
// address: every load is checked against the end of the batch or of its
// record first, and then made through an unsafe pointer, with no slice and
// no second bounds check. Positions are offsets from buf's start, so no
// pointer past buf is ever made.
func scan(buf []byte, p, n int) (nrec, nhdr int, ok bool) {
	end := len(buf)
	base := unsafe.Pointer(unsafe.SliceData(buf))
	for range n {
		if end-p < 8 {
			return 0, 0, false
		}
		e := u64(base, p)
		p += 8
		if e == keepEntry {
			continue
		}
		status, count := uint32(e), uint32(e>>32)
		if status == wire.EntryReject {
			if uint64(count) > uint64(end-p) {
				return 0, 0, false
			}
			p += int(count)
			continue
		}
		if status != wire.EntryOK {
			return 0, 0, false
		}
		for range count {
			rend, hc, ok := checkRecord(base, p, end)
			if !ok {
				return 0, 0, false
			}
			p = rend
			nrec++
			nhdr += hc
		}
	}
	return nrec, nhdr, p == end
}

// checkRecord reports whether an output record, its size and then its
// fields, starts at base+p and ends by end, and returns where it ends and
// its header count.
func checkRecord(base unsafe.Pointer, p, end int) (rend, hc int, ok bool) {
	if end-p < 4 {
		return 0, 0, false
	}
	size := u32(base, p)
	p += 4
	if size < 20 || uint64(size) > uint64(end-p) {
		return 0, 0, false
	}
	// The fields after offset, timestamp and partition must end exactly
	// at rend.
	rend = p + int(size)
	q := p + 20
	if rend-q < 4 {
		return 0, 0, false
	}
	if l := u32(base, q); l != math.MaxUint32 { // the key
		if uint64(l) > uint64(rend-q-4) { // a negative length (> MaxInt32) is past the end too
			return 0, 0, false
		}
		q += int(l)
	}
	q += 4
	if rend-q < 4 {
		return 0, 0, false
	}
	if l := u32(base, q); l != math.MaxUint32 { // the value
		if uint64(l) > uint64(rend-q-4) {
			return 0, 0, false
		}
		q += int(l)
	}
	q += 4
	if rend-q < 4 {
		return 0, 0, false
	}
	h := u32(base, q)
	q += 4
	// Each header takes at least 8 bytes: this bounds the loop and the
	// count (<= MaxInt32).
	if uint64(h) > uint64(rend-q)/8 {
		return 0, 0, false
	}
	for range h {
		if rend-q < 8 { // the name's length and the value's
			return 0, 0, false
		}
		kl := u32(base, q)
		q += 4
		if uint64(kl) > uint64(rend-q-4) {
			return 0, 0, false
		}
		q += int(kl)
		vl := u32(base, q)
		q += 4
		if vl != math.MaxUint32 {
			if uint64(vl) > uint64(rend-q) {
				return 0, 0, false
			}
			q += int(vl)
		}
	}
	return rend, int(h), q == rend
}

// oneRecord is the 8 bytes of an entry OK with out_count 1 read as one
// little-endian uint64.
const oneRecord = uint64(1)<<32 | wire.EntryOK

// minRecord is the fewest bytes an entry with one output record takes.
const minRecord = 8 + 4 + 20 + 4 + 4 + 4

// fillUniform decodes the longest run of entries at the start of buf, a
// result batch for in, that each answer one output record with as many
// headers as the first: it checks each as scan does and decodes it at once,
// into arrays of records and headers sized for every entry of the batch to
// be one (no more than the batch's size allows). It returns how many
// entries it decoded and the position after them; the first other entry,
// well formed or not, is left to scan and fill.
func fillUniform(buf []byte, in []record.Record, results []plugins.Result) (entries, p int) {
	end := len(buf)
	base := unsafe.Pointer(unsafe.SliceData(buf))
	p = 4
	n := len(results)
	if end-p < 8 || u64(base, p) != oneRecord || uint64(n) > uint64(end)/minRecord {
		return 0, 4
	}
	_, hc0, ok := checkRecord(base, p+8, end)
	if !ok || uint64(hc0)*uint64(n) > uint64(end)/8 {
		return 0, 4
	}
	recs := make([]record.Record, n)
	var hdrs []record.Header
	if hc0 > 0 {
		hdrs = make([]record.Header, hc0*n)
	}
	in = in[:n]
	for i := range results {
		if end-p < 8 || u64(base, p) != oneRecord {
			return i, p
		}
		rend, hc, ok := checkRecord(base, p+8, end)
		if !ok || hc != hc0 {
			return i, p
		}
		src, r := &in[i], &recs[i]
		r.Offset, r.Partition, r.Topic = src.Offset, src.Partition, src.Topic
		r.Timestamp = fromMs(int64(u64(base, p+20)))
		q := p + 32
		p = rend
		r.Key, q = bytesAt(buf, base, q)
		r.Value, q = bytesAt(buf, base, q)
		q += 4
		if hc > 0 {
			h := hdrs[:hc:hc]
			hdrs = hdrs[hc:]
			r.Headers = h
			for k := range h {
				kl := int(u32(base, q))
				q += 4
				if kl > 0 {
					h[k].Key = unsafe.String((*byte)(unsafe.Add(base, q)), kl)
				}
				q += kl
				h[k].Value, q = bytesAt(buf, base, q)
			}
		}
		results[i].Records = recs[i : i+1 : i+1]
	}
	return n, p
}

// fill is fillPortable for the machines scan is for: the lengths scan
// checked are loaded through unsafe pointers and the fields made with
// unsafe.Slice and unsafe.String, without a bounds check each.
func fill(buf []byte, p int, in []record.Record, results []plugins.Result, reject func(string) error, recs []record.Record, nhdr int) {
	var hdrs []record.Header
	if nhdr > 0 {
		hdrs = make([]record.Header, nhdr)
	}
	base := unsafe.Pointer(unsafe.SliceData(buf))
	in = in[:len(results)]
	for i := range results {
		e := u64(base, p)
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
			r := &out[j]
			size := int(u32(base, p))
			r.Offset, r.Partition, r.Topic = src.Offset, src.Partition, src.Topic
			r.Timestamp = fromMs(int64(u64(base, p+12)))
			q := p + 24
			p += 4 + size
			r.Key, q = bytesAt(buf, base, q)
			r.Value, q = bytesAt(buf, base, q)
			hc := int(u32(base, q))
			q += 4
			if hc > 0 {
				h := hdrs[:hc:hc]
				hdrs = hdrs[hc:]
				r.Headers = h
				for k := range h {
					kl := int(u32(base, q))
					q += 4
					if kl > 0 {
						h[k].Key = unsafe.String((*byte)(unsafe.Add(base, q)), kl)
					}
					q += kl
					h[k].Value, q = bytesAt(buf, base, q)
				}
			}
		}
		results[i].Records = out
	}
}

// bytesAt returns the nullable length-prefixed field at base+q in buf (a
// length of -1 is null) and the position after it: buf[q+4:q+4+n:q+4+n],
// which for n == 0 is an empty slice at buf's start, as Go slices one of
// capacity 0.
func bytesAt(buf []byte, base unsafe.Pointer, q int) ([]byte, int) {
	n := int(int32(u32(base, q)))
	q += 4
	switch {
	case n > 0:
		return unsafe.Slice((*byte)(unsafe.Add(base, q)), n), q + n
	case n == 0:
		return buf[:0:0], q
	}
	return nil, q
}
