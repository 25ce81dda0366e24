//go:build amd64 || arm64

package abi

import (
	"math"
	"unsafe"

	"github.com/streamd/streamd/record"
	wire "github.com/streamd/streamd/sdk/go/streamd/abi"
)

// encode is EncodeRequest for little-endian machines that store words at
// any address: after the one bounds check of a record, its fields go to dst
// through unsafe pointers, without a bounds check per field, and short byte
// fields move as two overlapping words instead of through memmove. It is
// about 25% faster than encodePortable, which tests check it against.
func encode(dst []byte, op wire.Op, recs []record.Record) (n int, ok bool) {
	if !putBatchHead(dst, op, len(recs)) {
		return 0, false
	}
	base := unsafe.Pointer(unsafe.SliceData(dst))
	p := 8
	for i := range recs {
		r := &recs[i]
		key, val, hdrs := r.Key, r.Value, r.Headers
		size, fit := fits(dst, p, r)
		if !fit {
			return p, false
		}
		w := unsafe.Add(base, p)
		end := unsafe.Add(w, 4+size)
		p += 4 + size
		*(*uint32)(w) = uint32(size)
		*(*int64)(unsafe.Add(w, 4)) = r.Offset
		*(*int64)(unsafe.Add(w, 12)) = toMs(r.Timestamp)
		*(*int32)(unsafe.Add(w, 20)) = r.Partition
		w = putUnaligned(unsafe.Add(w, 24), key)
		w = putUnaligned(w, val)
		*(*uint32)(w) = uint32(len(hdrs))
		w = unsafe.Add(w, 4)
		for j := range hdrs {
			hk, hv := hdrs[j].Key, hdrs[j].Value
			// The sizes above read the headers once; a header changed since
			// (a caller's data race) must not make this write past the record.
			if uintptr(end)-uintptr(w) < uintptr(8+len(hk)+len(hv)) {
				panic("abi: a record's headers changed while it was encoded")
			}
			*(*uint32)(w) = uint32(len(hk))
			w = unsafe.Add(w, 4)
			if len(hk) > 0 {
				w = copyUnaligned(w, unsafe.StringData(hk), len(hk))
			}
			w = putUnaligned(w, hv)
		}
	}
	return p, true
}

// putUnaligned writes the nullable length-prefixed field f at w and returns
// the address after it.
func putUnaligned(w unsafe.Pointer, f []byte) unsafe.Pointer {
	if f == nil {
		*(*uint32)(w) = math.MaxUint32 // -1
		return unsafe.Add(w, 4)
	}
	*(*uint32)(w) = uint32(len(f))
	return copyUnaligned(unsafe.Add(w, 4), unsafe.SliceData(f), len(f))
}

// copyUnaligned copies n bytes from src to w and returns w+n.
func copyUnaligned(w unsafe.Pointer, src *byte, n int) unsafe.Pointer {
	if n >= 8 && n <= 16 {
		s := unsafe.Pointer(src)
		*(*uint64)(w) = *(*uint64)(s)
		*(*uint64)(unsafe.Add(w, n-8)) = *(*uint64)(unsafe.Add(s, n-8))
	} else if n > 0 {
		copy(unsafe.Slice((*byte)(w), n), unsafe.Slice(src, n))
	}
	return unsafe.Add(w, n)
}
