package fuel

import (
	"errors"
	"fmt"
	"io"
	"math"
)

var errLEB = errors.New("LEB128 number too long")

// reader decodes the parts of the binary format; the first error sticks and
// later reads return zero values. base is the offset of b in the module, for
// messages.
type reader struct {
	b    []byte
	i    int
	base int
	err  error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) byte() byte {
	if r.err != nil || r.i >= len(r.b) {
		r.fail(io.ErrUnexpectedEOF)
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

// leb reads an LEB128 number of at most maxBytes bytes and returns its low
// 64 bits as unsigned.
func (r *reader) leb(maxBytes int) uint64 {
	var v uint64
	for n := 0; ; n++ {
		if n == maxBytes {
			r.fail(errLEB)
			return 0
		}
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if n < 10 {
			v |= uint64(c&0x7f) << (7 * n)
		}
		if c&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) u32() uint32 {
	v := r.leb(5)
	if v > math.MaxUint32 {
		r.fail(errLEB)
		return 0
	}
	return uint32(v)
}

// s32 reads a signed LEB128 number of at most 5 bytes.
func (r *reader) s32() int32 {
	var v int64
	shift := uint(0)
	for n := 0; n < 5; n++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if c&0x40 != 0 && shift < 64 {
				v |= -1 << shift
			}
			if v < math.MinInt32 || v > math.MaxInt32 {
				r.fail(errLEB)
				return 0
			}
			return int32(v)
		}
	}
	r.fail(errLEB)
	return 0
}

func (r *reader) skip(n int) {
	if r.err == nil && n > len(r.b)-r.i {
		r.fail(io.ErrUnexpectedEOF)
	}
	if r.err == nil {
		r.i += n
	}
}

func (r *reader) name() string {
	n := r.u32()
	s := r.i
	r.skip(int(n))
	if r.err != nil {
		return ""
	}
	return string(r.b[s:r.i])
}

// valtype reads a value type: one byte, or a reference type with a heap
// type (function references proposal).
func (r *reader) valtype() {
	if c := r.byte(); c == 0x63 || c == 0x64 {
		r.leb(5)
	}
}

// blocktype reads a block type: an s33 (0x40, a value type, or a type
// index).
func (r *reader) blocktype() { r.leb(5) }

func (r *reader) limits() {
	f := r.byte()
	if f > 7 {
		r.fail(fmt.Errorf("limits flags 0x%02x", f))
		return
	}
	r.leb(10)
	if f&1 != 0 {
		r.leb(10)
	}
}

func (r *reader) memarg() {
	if align := r.u32(); align&0x40 != 0 {
		r.u32() // memory index (multi-memory)
	}
	r.leb(10)
}

// done reports an error, or bytes left over, after a section's entries.
func (r *reader) done(what string) error {
	if r.err != nil {
		return r.errorf("%s", what)
	}
	if r.i != len(r.b) {
		return fmt.Errorf("%s: %d bytes after its entries at offset %d", what, len(r.b)-r.i, r.base+r.i)
	}
	return nil
}

func (r *reader) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %w at offset %d", fmt.Sprintf(format, args...), r.err, r.base+r.i)
}

func appendU32(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func appendS32(dst []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}

func appendName(dst []byte, s string) []byte {
	return append(appendU32(dst, uint32(len(s))), s...)
}

func appendSection(dst []byte, id byte, payload []byte) []byte {
	dst = append(dst, id)
	dst = appendU32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// s33 reads a signed LEB128 number of at most 5 bytes as a block type or
// heap type: negative for a value type or an abstract heap type, else a
// type index.
func (r *reader) s33() int64 {
	var v int64
	shift := uint(0)
	for n := 0; n < 5; n++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
	r.fail(errLEB)
	return 0
}
