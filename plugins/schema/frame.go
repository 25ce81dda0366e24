package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The Confluent wire format: a zero magic byte, the schema id as a 4-byte
// big-endian integer, then (Protobuf only) the message indexes, then the
// payload.
const (
	magicByte  = 0
	headerSize = 5
	// maxIndexes bounds the message-index path of a Protobuf record: a
	// nesting depth no real schema reaches, so that a hostile count cannot
	// make the decoder allocate.
	maxIndexes = 64
)

// errNotFramed is why a payload that does not start with the magic byte is
// rejected.
var errNotFramed = errors.New("not in the Confluent wire format (no magic byte 0 and schema id)")

// ParseFrame splits a Confluent-framed payload into its schema id and the
// rest (the Protobuf message indexes, if any, and the encoded data).
func ParseFrame(b []byte) (id int, rest []byte, err error) {
	if len(b) < headerSize || b[0] != magicByte {
		if len(b) > 0 && b[0] != magicByte {
			return 0, nil, fmt.Errorf("%w: first byte is 0x%02x", errNotFramed, b[0])
		}
		return 0, nil, fmt.Errorf("%w: %d bytes", errNotFramed, len(b))
	}
	return int(binary.BigEndian.Uint32(b[1:5])), b[5:], nil
}

// AppendFrame appends the magic byte and schema id to dst.
func AppendFrame(dst []byte, id int) []byte {
	return binary.BigEndian.AppendUint32(append(dst, magicByte), uint32(id))
}

// ParseIndexes reads the message indexes that follow the schema id of a
// Protobuf record: a zigzag varint count, then that many zigzag varint
// indexes. A count of 0 (one zero byte) stands for [0], the first message
// of the file.
func ParseIndexes(b []byte) (idx []int, rest []byte, err error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return nil, nil, errors.New("message indexes: truncated count")
	}
	b = b[k:]
	if n == 0 {
		return []int{0}, b, nil
	}
	if n < 0 || n > maxIndexes {
		return nil, nil, fmt.Errorf("message indexes: count %d out of range 0..%d", n, maxIndexes)
	}
	idx = make([]int, n)
	for i := range idx {
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, nil, fmt.Errorf("message indexes: truncated at index %d of %d", i, n)
		}
		if v < 0 || v > 1<<20 {
			return nil, nil, fmt.Errorf("message indexes: index %d is %d", i, v)
		}
		idx[i] = int(v)
		b = b[k:]
	}
	return idx, b, nil
}

// AppendIndexes appends idx in the framing's form ([0] as a single 0).
func AppendIndexes(dst []byte, idx []int) []byte {
	if len(idx) == 1 && idx[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(idx)))
	for _, i := range idx {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}
