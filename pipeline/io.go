package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/streamd/streamd/record"
)

// GenerateSource makes synthetic v2 order records:
//
//	{"order_id":"o-1","customer":{"id":"c-1","name":"Customer 1"},"amount_cents":1234,"currency":"EUR","tags":["new"]}
//
// keyed by customer id, with header fluid-schema-version: 2.
type GenerateSource struct {
	rate  float64
	count int64
	keys  int
	start time.Time
	n     int64
}

// NewGenerateSource returns a source of count records (0: unbounded) at rate
// records per second (0: as fast as possible) over keys distinct keys.
func NewGenerateSource(rate float64, count int64, keys int) *GenerateSource {
	return &GenerateSource{rate: rate, count: count, keys: max(1, keys)}
}

var currencies = []string{"EUR", "USD", "GBP", "CZK"}

// Order returns the n-th synthetic order's value (deterministic in n).
func Order(n int64, keys int) (key, value []byte) {
	c := n % int64(keys)
	key = []byte("c-" + strconv.FormatInt(c, 10))
	v := make([]byte, 0, 160)
	v = append(v, `{"order_id":"o-`...)
	v = strconv.AppendInt(v, n, 10)
	v = append(v, `","customer":{"id":"c-`...)
	v = strconv.AppendInt(v, c, 10)
	v = append(v, `","name":"Customer `...)
	v = strconv.AppendInt(v, c, 10)
	v = append(v, `"},"amount_cents":`...)
	v = strconv.AppendInt(v, (n*7919)%100000, 10)
	v = append(v, `,"currency":"`...)
	v = append(v, currencies[n%int64(len(currencies))]...)
	v = append(v, `","tags":["generated","batch-`...)
	v = strconv.AppendInt(v, n/1000, 10)
	v = append(v, `"]}`...)
	return key, v
}

// Fetch implements Source.
func (g *GenerateSource) Fetch(ctx context.Context) ([]Msg, error) { return g.FetchUpTo(ctx, 256) }

// FetchUpTo implements BoundedSource.
func (g *GenerateSource) FetchUpTo(ctx context.Context, n int) ([]Msg, error) {
	if g.start.IsZero() {
		g.start = time.Now()
	}
	if g.count > 0 && g.n >= g.count {
		return nil, io.EOF
	}
	want := int64(max(1, min(n, 256)))
	if g.rate > 0 {
		due := int64(time.Since(g.start).Seconds()*g.rate) + 1
		for due <= g.n {
			wait := time.Duration(float64(g.n+1-due)/g.rate*float64(time.Second)) + time.Millisecond
			if err := sleep(ctx, wait); err != nil {
				return nil, err
			}
			due = int64(time.Since(g.start).Seconds()*g.rate) + 1
		}
		want = min(want, due-g.n)
	}
	if g.count > 0 {
		want = min(want, g.count-g.n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now()
	msgs := make([]Msg, want)
	for i := range msgs {
		k, v := Order(g.n, g.keys)
		msgs[i].Record = record.Record{Key: k, Value: v, Timestamp: now, Topic: "generate", Offset: g.n,
			Headers: []record.Header{{Key: "fluid-schema-version", Value: []byte("2")}}}
		g.n++
	}
	return msgs, nil
}

// Ack implements Source; generated records need no acknowledgement.
func (g *GenerateSource) Ack([]Msg) {}

// Commit implements Source.
func (g *GenerateSource) Commit(context.Context) error { return nil }

// Close implements Source.
func (g *GenerateSource) Close() {}

// FileSource reads JSON-lines records (see package record) from a file.
type FileSource struct {
	f *os.File
	r *record.Reader
}

// NewFileSource opens path.
func NewFileSource(path string) (*FileSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &FileSource{f: f, r: record.NewReader(f, path)}, nil
}

// Fetch implements Source.
func (s *FileSource) Fetch(ctx context.Context) ([]Msg, error) { return s.FetchUpTo(ctx, 256) }

// FetchUpTo implements BoundedSource.
func (s *FileSource) FetchUpTo(ctx context.Context, n int) ([]Msg, error) {
	var msgs []Msg
	for len(msgs) < max(1, min(n, 256)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := s.r.Next()
		if err == io.EOF {
			if len(msgs) > 0 {
				return msgs, nil
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, Msg{Record: r})
	}
	return msgs, nil
}

// Ack implements Source.
func (s *FileSource) Ack([]Msg) {}

// Commit implements Source.
func (s *FileSource) Commit(context.Context) error { return nil }

// Close implements Source.
func (s *FileSource) Close() { s.f.Close() }

// WriterSink writes records as JSON lines to a writer. If the writer is an
// *os.File it is synced after every batch, so a written batch is durable.
type WriterSink struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewWriterSink returns a sink writing JSON lines to w.
func NewWriterSink(w io.Writer) *WriterSink { return &WriterSink{w: w} }

// NewFileSink appends JSON lines to the file at path, creating it.
func NewFileSink(path string) (*WriterSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return NewWriterSink(f), nil
}

// Write implements plugins.Sink.
func (s *WriterSink) Write(_ context.Context, batch []record.Record) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = s.buf[:0]
	for i := range batch {
		s.buf = record.AppendJSON(s.buf, &batch[i])
		s.buf = append(s.buf, '\n')
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	if f, ok := s.w.(*os.File); ok && f != os.Stdout && f != os.Stderr {
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("sync: %w", err)
		}
	}
	return make([]error, len(batch)), nil
}

// Close closes the underlying writer if it is a file other than stdout.
func (s *WriterSink) Close() error {
	if f, ok := s.w.(*os.File); ok && f != os.Stdout && f != os.Stderr {
		return f.Close()
	}
	return nil
}

// DropSink accepts and discards every record.
type DropSink struct{}

// Write implements plugins.Sink.
func (DropSink) Write(_ context.Context, batch []record.Record) ([]error, error) {
	return make([]error, len(batch)), nil
}
