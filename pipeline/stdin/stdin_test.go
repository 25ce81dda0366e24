package stdin

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/pipeline"
)

// TestSource: the records of the input in order, in fetches of at most n,
// then io.EOF at its end, and again on every later fetch.
func TestSource(t *testing.T) {
	in := strings.Repeat(`{"key":"k","value":"v"}`+"\n", 300)
	s := NewReaderSource(strings.NewReader(in), "stdin")
	defer func() { _ = s.Close(context.Background()) }()
	ctx := context.Background()
	got := 0
	for {
		msgs, err := s.FetchUpTo(ctx, 100)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 || len(msgs) > 100 {
			t.Fatalf("a fetch of at most 100 returned %d records", len(msgs))
		}
		for _, m := range msgs {
			if string(m.Record.Key) != "k" || string(m.Record.Value) != "v" {
				t.Fatalf("record %d: %q=%q", got, m.Record.Key, m.Record.Value)
			}
			got++
		}
	}
	if got != 300 {
		t.Fatalf("read %d records, want 300", got)
	}
	if _, err := s.Fetch(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("fetch after the end: %v, want io.EOF", err)
	}
}

// TestSourceBadLine: a line that is not a record fails the fetch with an
// error naming the input and the line, after the records before it.
func TestSourceBadLine(t *testing.T) {
	s := NewReaderSource(strings.NewReader("{\"value\":\"a\"}\nnot json\n"), "stdin")
	defer func() { _ = s.Close(context.Background()) }()
	var n int
	var err error
	for err == nil {
		var msgs []pipeline.Msg
		msgs, err = s.FetchUpTo(context.Background(), 10)
		n += len(msgs)
	}
	if n != 1 || err == nil || !strings.Contains(err.Error(), "stdin:2") {
		t.Fatalf("%d records then %v; want 1 record then an error naming stdin:2", n, err)
	}
}

// TestSourceQuietInput: a fetch waiting on an input that sends nothing
// returns when its context is done (a shutdown is not held up), and
// records written later are still read.
func TestSourceQuietInput(t *testing.T) {
	pr, pw := io.Pipe()
	s := NewReaderSource(pr, "stdin")
	defer func() { _ = s.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Fetch(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fetch on a quiet input: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("fetch returned %v after its context was done", d)
	}
	go func() {
		_, _ = pw.Write([]byte(`{"value":"late"}` + "\n"))
		_ = pw.Close()
	}()
	msgs, err := s.Fetch(context.Background())
	if err != nil || len(msgs) != 1 || string(msgs[0].Record.Value) != "late" {
		t.Fatalf("after the input spoke: %d records, %v", len(msgs), err)
	}
	if _, err := s.Fetch(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("after the input closed: %v, want io.EOF", err)
	}
}
