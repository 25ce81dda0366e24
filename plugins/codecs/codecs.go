package codecs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/streamd/streamd/plugins"
)

// DefaultMaxDecodedSize is the default limit on one decoded payload: 64 MiB.
const DefaultMaxDecodedSize = 64 << 20

// ErrTooLarge is wrapped by the per-payload error of a payload whose decoded
// size would exceed the codec's limit (see [WithMaxDecodedSize]).
var ErrTooLarge = errors.New("decoded size exceeds the limit")

// Option configures a codec made by [New].
type Option func(*options) error

type options struct {
	maxDecoded int
}

// WithMaxDecodedSize sets the largest payload, in bytes, that Decode may
// produce; a payload that would decode to more fails with [ErrTooLarge]. It
// must be at least 1. The default is [DefaultMaxDecodedSize].
func WithMaxDecodedSize(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("max decoded size must be at least 1 byte, got %d", n)
		}
		o.maxDecoded = n
		return nil
	}
}

// engine is one codec's compression: it works on a single payload, writing
// into a scratch buffer that it may grow and that the caller reuses.
type engine interface {
	// encode returns src encoded; the result may alias scratch.
	encode(s *scratch, src []byte) ([]byte, error)
	// decode returns src decoded, at most limit bytes; the result may alias
	// scratch.
	decode(s *scratch, src []byte, limit int) ([]byte, error)
	close() error
}

// spec describes one codec name: its level range and how to build it.
type spec struct {
	name     string
	min, max int
	def      string // the default level, for messages and docs
	build    func(level int, o options) (engine, error)
}

// specs returns the built-in codecs, sorted by name.
func specs() []spec {
	return []spec{
		{name: "gzip", min: 1, max: 9, def: "6", build: newGzip},
		{name: "lz4", min: 1, max: 9, def: "fast (non-HC)", build: newLZ4},
		{name: "snappy", min: 1, max: 3, def: "2", build: newSnappy},
		{name: "zstd", min: 1, max: 22, def: "3", build: newZstd},
	}
}

// Names returns the names of the built-in codecs, sorted.
func Names() []string {
	ss := specs()
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.name
	}
	return names
}

// Levels returns the compression levels codec name accepts, lo to hi (0
// always means its default); ok is false for a name that is not built in.
func Levels(name string) (lo, hi int, ok bool) {
	for _, s := range specs() {
		if s.name == name {
			return s.min, s.max, true
		}
	}
	return 0, 0, false
}

// New returns the built-in codec name ("gzip", "lz4", "snappy" or "zstd") at
// the given compression level; level 0 is the codec's default (see the
// package documentation for each codec's range). The codec is safe for
// concurrent use. It also implements [plugins.Plugin]: Close releases its
// compressors.
func New(name string, level int, opts ...Option) (plugins.Codec, error) {
	var sp *spec
	ss := specs()
	for i := range ss {
		if ss[i].name == name {
			sp = &ss[i]
		}
	}
	if sp == nil {
		return nil, fmt.Errorf("codecs: unknown codec %q (valid: %s)", name, strings.Join(Names(), ", "))
	}
	if level != 0 && (level < sp.min || level > sp.max) {
		return nil, fmt.Errorf("codecs: %s level %d out of range %d..%d (0 = default, %s)", name, level, sp.min, sp.max, sp.def)
	}
	o := options{maxDecoded: DefaultMaxDecodedSize}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("codecs: %s: %w", name, err)
		}
	}
	e, err := sp.build(level, o)
	if err != nil {
		return nil, fmt.Errorf("codecs: %s level %d: %w", name, level, err)
	}
	return &codec{name: name, level: level, engine: e, maxDecoded: o.maxDecoded}, nil
}

// codec runs an engine over batches.
type codec struct {
	name       string
	level      int
	engine     engine
	maxDecoded int
	scratch    sync.Pool // of *scratch
}

var _ plugins.Plugin = (*codec)(nil)

// Manifest describes the built-in codec; ABI is 0 as it speaks no plugin ABI.
func (c *codec) Manifest() plugins.Manifest {
	return plugins.Manifest{Name: c.name, Kind: plugins.KindCodec, Version: "builtin"}
}

// Close releases the codec's compressors. The codec must not be used after.
func (c *codec) Close(context.Context) error { return c.engine.close() }

func (c *codec) String() string {
	if c.level == 0 {
		return c.name
	}
	return fmt.Sprintf("%s(level %d)", c.name, c.level)
}

// Encode compresses each payload. Only a cancelled ctx fails the batch.
func (c *codec) Encode(ctx context.Context, payloads [][]byte) ([]plugins.Payload, error) {
	return c.run(ctx, "encode", payloads, func(s *scratch, p []byte) ([]byte, error) {
		return c.engine.encode(s, p)
	})
}

// Decode decompresses each payload; a payload that does not decode, or would
// decode to more than the size limit, gets its own error.
func (c *codec) Decode(ctx context.Context, payloads [][]byte) ([]plugins.Payload, error) {
	return c.run(ctx, "decode", payloads, func(s *scratch, p []byte) ([]byte, error) {
		if len(p) == 0 {
			return nil, fmt.Errorf("empty payload is not %s data", c.name)
		}
		return c.engine.decode(s, p, c.maxDecoded)
	})
}

// ctxCheckEvery is how many payloads run between two looks at ctx.
const ctxCheckEvery = 64

func (c *codec) run(ctx context.Context, op string, payloads [][]byte, f func(*scratch, []byte) ([]byte, error)) ([]plugins.Payload, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("codecs: %s %s: %w", c.name, op, err)
	}
	s, _ := c.scratch.Get().(*scratch)
	if s == nil {
		s = new(scratch)
	}
	defer func() {
		s.release()
		c.scratch.Put(s)
	}()
	var a arena
	out := make([]plugins.Payload, len(payloads))
	for i, p := range payloads {
		if i > 0 && i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("codecs: %s %s: %w", c.name, op, err)
			}
		}
		if p == nil {
			continue // a null value stays null
		}
		b, err := f(s, p)
		if err != nil {
			out[i].Err = fmt.Errorf("codecs: %s: %s payload %d (%d bytes): %w", c.name, op, i, len(p), err)
			continue
		}
		out[i].Data = a.copy(b)
	}
	return out, nil
}

// scratch holds the per-batch buffers an engine reuses between payloads.
type scratch struct {
	buf []byte
}

// maxKeptScratch is the largest scratch buffer kept for the next batch.
const maxKeptScratch = 1 << 20

func (s *scratch) release() {
	if cap(s.buf) > maxKeptScratch {
		s.buf = nil
	}
}

// grow returns s.buf with capacity at least n and length 0.
func (s *scratch) grow(n int) []byte {
	if cap(s.buf) < n {
		s.buf = make([]byte, 0, n)
	}
	return s.buf[:0]
}

// arena hands out the output payloads of one batch from a few shared
// chunks, so that a batch of small payloads costs a few allocations, not one
// per payload. Payloads larger than arenaLarge get their own allocation, so a
// caller keeping one output payload keeps at most arenaChunk bytes alive.
type arena struct {
	buf []byte
}

const (
	arenaChunk = 32 << 10
	arenaLarge = 4 << 10
)

// copy returns a copy of b with its capacity capped at its length, so that
// appending to one payload never overwrites the next.
func (a *arena) copy(b []byte) []byte {
	if len(b) > arenaLarge {
		return append(make([]byte, 0, len(b)), b...)
	}
	if cap(a.buf)-len(a.buf) < len(b) || a.buf == nil {
		a.buf = make([]byte, 0, arenaChunk)
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}
