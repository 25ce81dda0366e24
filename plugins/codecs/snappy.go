package codecs

import (
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
)

// snappyCodec writes the plain snappy block format. Every level emits
// standard snappy; they differ only in how hard the encoder searches.
type snappyCodec struct {
	enc func(dst, src []byte) []byte
}

func newSnappy(level int, _ options) (engine, error) {
	switch level {
	case 1:
		return snappyCodec{enc: s2.EncodeSnappy}, nil
	case 0, 2:
		return snappyCodec{enc: s2.EncodeSnappyBetter}, nil
	case 3:
		return snappyCodec{enc: s2.EncodeSnappyBest}, nil
	}
	return nil, fmt.Errorf("no snappy level %d", level)
}

func (c snappyCodec) encode(s *scratch, src []byte) ([]byte, error) {
	n := snappy.MaxEncodedLen(len(src))
	if n < 0 {
		return nil, fmt.Errorf("payload of %d bytes is too large for snappy", len(src))
	}
	dst := s.grow(n)
	return c.enc(dst[:n], src), nil
}

func (snappyCodec) decode(s *scratch, src []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w of %d bytes: header says %d", ErrTooLarge, limit, n)
	}
	return snappy.DecodeStrict(s.grow(n), src)
}

func (snappyCodec) close() error { return nil }
