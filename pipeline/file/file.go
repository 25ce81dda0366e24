package file

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// Source reads JSON-lines records (see package record) from a file.
type Source struct {
	f *os.File
	r *record.Reader
}

// NewSource opens path.
func NewSource(path string) (*Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &Source{f: f, r: record.NewReader(f, path)}, nil
}

// Fetch implements pipeline.Source.
func (s *Source) Fetch(ctx context.Context) ([]pipeline.Msg, error) { return s.FetchUpTo(ctx, 256) }

// FetchUpTo implements pipeline.BoundedSource.
func (s *Source) FetchUpTo(ctx context.Context, n int) ([]pipeline.Msg, error) {
	var msgs []pipeline.Msg
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
		msgs = append(msgs, pipeline.Msg{Record: r})
	}
	return msgs, nil
}

// Ack implements pipeline.Source.
func (s *Source) Ack([]pipeline.Msg) {}

// Commit implements pipeline.Source.
func (s *Source) Commit(context.Context) error { return nil }

// Close implements pipeline.Source: it closes the file.
func (s *Source) Close(context.Context) error { return s.f.Close() }

// WriterSink writes records as JSON lines to a writer. If the writer is an
// *os.File it is synced after every batch, so a written batch is durable.
type WriterSink struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewWriterSink returns a sink writing JSON lines to w.
func NewWriterSink(w io.Writer) *WriterSink { return &WriterSink{w: w} }

// NewSink appends JSON lines to the file at path, creating it.
func NewSink(path string) (*WriterSink, error) {
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
func (s *WriterSink) Close(context.Context) error {
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
