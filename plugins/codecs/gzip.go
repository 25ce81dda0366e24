package codecs

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipCodec writes one RFC 1952 member per payload.
type gzipCodec struct {
	level   int
	writers sync.Pool // of *gzip.Writer
	readers sync.Pool // of *gzip.Reader
}

func newGzip(level int, _ options) (engine, error) {
	if level == 0 {
		level = 6 // gzip(1)'s default
	}
	// Fail here, not on the first payload, if the level is refused.
	if _, err := gzip.NewWriterLevel(io.Discard, level); err != nil {
		return nil, err
	}
	return &gzipCodec{level: level}, nil
}

func (g *gzipCodec) encode(s *scratch, src []byte) ([]byte, error) {
	buf := bytes.NewBuffer(s.grow(len(src)/2 + 64))
	zw, _ := g.writers.Get().(*gzip.Writer)
	if zw == nil {
		var err error
		if zw, err = gzip.NewWriterLevel(buf, g.level); err != nil {
			return nil, err
		}
	} else {
		zw.Reset(buf)
	}
	defer g.writers.Put(zw)
	return compress(s, buf, zw, src)
}

func (g *gzipCodec) decode(s *scratch, src []byte, limit int) ([]byte, error) {
	zr, _ := g.readers.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(src))
	} else {
		err = zr.Reset(bytes.NewReader(src))
	}
	if err != nil {
		// A Reader whose Reset failed can still be Reset again.
		if zr != nil {
			g.readers.Put(zr)
		}
		return nil, err
	}
	defer g.readers.Put(zr)
	return readLimited(s, zr, len(src), limit)
}

func (g *gzipCodec) close() error { return nil }

// compress writes src through zw, a compressor writing to buf, and closes
// it: the compressed payload is buf's bytes, kept in s.
func compress(s *scratch, buf *bytes.Buffer, zw io.WriteCloser, src []byte) ([]byte, error) {
	if _, err := zw.Write(src); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	s.buf = buf.Bytes()
	return s.buf, nil
}

// readLimited reads r to its end into s, failing with ErrTooLarge once more
// than limit bytes come out. hint is the compressed size, to size the buffer.
func readLimited(s *scratch, r io.Reader, hint, limit int) ([]byte, error) {
	want := min(hint*4+512, limit+1)
	buf := bytes.NewBuffer(s.grow(want))
	n, err := buf.ReadFrom(io.LimitReader(r, int64(limit)+1))
	s.buf = buf.Bytes()
	if err != nil {
		return nil, err
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)
	}
	return s.buf, nil
}
