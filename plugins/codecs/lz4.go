package codecs

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// lz4Codec writes one LZ4 frame per payload.
type lz4Codec struct {
	opts    []lz4.Option
	writers sync.Pool // of *lz4.Writer
	readers sync.Pool // of *lz4.Reader
}

var lz4Levels = [...]lz4.CompressionLevel{lz4.Fast, lz4.Level1, lz4.Level2, lz4.Level3,
	lz4.Level4, lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}

func newLZ4(level int, _ options) (engine, error) {
	if level < 0 || level >= len(lz4Levels) {
		return nil, fmt.Errorf("no lz4 level %d", level)
	}
	c := &lz4Codec{opts: []lz4.Option{
		lz4.BlockSizeOption(lz4.Block64Kb),
		lz4.ChecksumOption(true),
		lz4.ConcurrencyOption(1),
		lz4.CompressionLevelOption(lz4Levels[level]),
	}}
	if err := lz4.NewWriter(nil).Apply(c.opts...); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *lz4Codec) encode(s *scratch, src []byte) ([]byte, error) {
	buf := bytes.NewBuffer(s.grow(len(src)/2 + 64))
	zw, _ := c.writers.Get().(*lz4.Writer)
	if zw == nil {
		zw = lz4.NewWriter(buf)
		if err := zw.Apply(c.opts...); err != nil {
			return nil, err
		}
	} else {
		zw.Reset(buf)
	}
	defer func() {
		zw.Reset(nil) // let go of buf
		c.writers.Put(zw)
	}()
	return compress(s, buf, zw, src)
}

func (c *lz4Codec) decode(s *scratch, src []byte, limit int) ([]byte, error) {
	zr, _ := c.readers.Get().(*lz4.Reader)
	if zr == nil {
		zr = lz4.NewReader(nil)
		if err := zr.Apply(lz4.ConcurrencyOption(1)); err != nil {
			return nil, err
		}
	}
	zr.Reset(bytes.NewReader(src))
	defer func() {
		zr.Reset(nil) // give the block buffer back
		c.readers.Put(zr)
	}()
	return readLimited(s, zr, len(src), limit)
}

func (c *lz4Codec) close() error { return nil }
