package testenv

import (
	"context"
	"testing"
)

// Closer is a Close, a Remove or a Shutdown: with or without a context
// (the project's closers take one: Close(ctx) error).
type Closer interface {
	func() error | func(context.Context) error
}

// call calls f, with a context that is never done if it takes one: a test
// that must bound a close calls it itself.
func call[F Closer](f F) error {
	switch f := any(f).(type) {
	case func() error:
		return f()
	case func(context.Context) error:
		return f(context.Background())
	}
	panic("unreachable")
}

// Check calls f (a Close, a Remove, a Shutdown) and fails tb if it returns
// an error; for a close whose error the test must see, such as a store that
// flushes or a file it wrote:
//
//	defer testenv.Check(t, st.Close)
func Check[F Closer](tb testing.TB, f F) {
	tb.Helper()
	if err := call(f); err != nil {
		tb.Error(err)
	}
}

// Cleanup runs Check(tb, f) when the test ends (tb.Cleanup).
func Cleanup[F Closer](tb testing.TB, f F) {
	tb.Helper()
	tb.Cleanup(func() { Check(tb, f) })
}

// ContextCloser is what closes with a context: plugins, modules, stores,
// sources and sinks.
type ContextCloser interface {
	Close(ctx context.Context) error
}

// Close closes c with ctx and fails tb if that returns an error:
//
//	defer testenv.Close(t, ctx, p)
func Close(tb testing.TB, ctx context.Context, c ContextCloser) {
	tb.Helper()
	if err := c.Close(ctx); err != nil {
		tb.Errorf("close: %v", err)
	}
}

// CloseAtEnd runs Close(tb, context.Background(), c) when the test ends
// (tb.Cleanup).
func CloseAtEnd(tb testing.TB, c ContextCloser) {
	tb.Helper()
	tb.Cleanup(func() { Close(tb, context.Background(), c) })
}

// Ignore calls f and drops its error, for a deferred close whose error says
// nothing about what the test checks: a response body, a connection or
// listener the test is done with, a reader it only read.
func Ignore[F Closer](f F) { _ = call(f) }
