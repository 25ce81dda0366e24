package stdin

import (
	"context"
	"io"
	"os"
	"sync"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// maxFetch bounds the records of one fetch.
const maxFetch = 256

// item is one record read, or the error that ended the input.
type item struct {
	rec record.Record
	err error
}

// Source reads JSON-lines records from a reader, the process's standard
// input by default. One goroutine reads ahead (at most maxFetch records);
// a fetch takes what it has read.
type Source struct {
	items chan item
	done  chan struct{}
	once  sync.Once
	err   error // the error that ended the input (io.EOF at its end), once seen
}

// NewSource returns a source reading os.Stdin.
func NewSource() *Source { return NewReaderSource(os.Stdin, "stdin") }

// NewReaderSource returns a source reading r; name is used in errors
// ("stdin:3: ...").
func NewReaderSource(r io.Reader, name string) *Source {
	s := &Source{items: make(chan item, maxFetch), done: make(chan struct{})}
	go s.read(record.NewReader(r, name))
	return s
}

// read sends every record of rd, then the error that ended it. It stops
// after Close (once its current read returns: a read of a pipe cannot be
// interrupted).
func (s *Source) read(rd *record.Reader) {
	for {
		rec, err := rd.Next()
		select {
		case s.items <- item{rec, err}:
		case <-s.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// Fetch implements pipeline.Source.
func (s *Source) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	return s.FetchUpTo(ctx, maxFetch)
}

// FetchUpTo implements pipeline.BoundedSource: it waits for one record
// (or ctx), then takes up to n of those already read. It returns io.EOF
// at the end of the input and a record's error (naming its line) when the
// input is not JSON lines.
func (s *Source) FetchUpTo(ctx context.Context, n int) ([]pipeline.Msg, error) {
	if s.err != nil {
		return nil, s.err
	}
	n = max(1, min(n, maxFetch))
	var msgs []pipeline.Msg
	for len(msgs) < n {
		var it item
		if len(msgs) == 0 {
			select {
			case it = <-s.items:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			select {
			case it = <-s.items:
			default:
				return msgs, nil
			}
		}
		if it.err != nil {
			s.err = it.err
			if len(msgs) > 0 {
				return msgs, nil
			}
			return nil, it.err
		}
		msgs = append(msgs, pipeline.Msg{Record: it.rec})
	}
	return msgs, nil
}

// Ack implements pipeline.Source: standard input has no positions.
func (s *Source) Ack([]pipeline.Msg) {}

// Commit implements pipeline.Source.
func (s *Source) Commit(context.Context) error { return nil }

// Close implements pipeline.Source: the reading goroutine stops after its
// current read. Standard input is left open (it belongs to the process).
func (s *Source) Close(context.Context) error {
	s.once.Do(func() { close(s.done) })
	return nil
}
