package codecs

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// zstdCodec writes one Zstandard frame per payload. Its encoder and decoder
// are safe for concurrent EncodeAll and DecodeAll calls.
type zstdCodec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

// zstdMinWindow is the smallest window the decoder accepts whatever the size
// limit: 8 MiB is what zstd(1) uses up to level 19.
const zstdMinWindow = 8 << 20

func newZstd(level int, o options) (engine, error) {
	if level == 0 {
		level = 3
	}
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithZeroFrames(true), // an empty payload still makes a frame
		zstd.WithEncoderCRC(true))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(uint64(o.maxDecoded)),
		zstd.WithDecoderMaxWindow(uint64(min(max(o.maxDecoded, zstdMinWindow), zstd.MaxWindowSize))))
	if err != nil {
		_ = enc.Close()
		return nil, err
	}
	return &zstdCodec{enc: enc, dec: dec}, nil
}

func (c *zstdCodec) encode(s *scratch, src []byte) ([]byte, error) {
	s.buf = c.enc.EncodeAll(src, s.grow(len(src)/2+64))
	return s.buf, nil
}

func (c *zstdCodec) decode(s *scratch, src []byte, limit int) ([]byte, error) {
	out, err := c.dec.DecodeAll(src, s.grow(min(len(src)*4+512, limit)))
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, fmt.Errorf("%w of %d bytes: %w", ErrTooLarge, limit, err)
		}
		return nil, err
	}
	if cap(out) <= maxKeptScratch {
		s.buf = out
	}
	return out, nil
}

func (c *zstdCodec) close() error {
	c.dec.Close()
	return c.enc.Close()
}
