package testenv

import "testing"

// Check calls f (a Close, a Remove, a Shutdown) and fails tb if it returns
// an error; for a close whose error the test must see, such as a store that
// flushes or a file it wrote:
//
//	defer testenv.Check(t, st.Close)
func Check(tb testing.TB, f func() error) {
	tb.Helper()
	if err := f(); err != nil {
		tb.Error(err)
	}
}

// Cleanup runs Check(tb, f) when the test ends (tb.Cleanup).
func Cleanup(tb testing.TB, f func() error) {
	tb.Helper()
	tb.Cleanup(func() { Check(tb, f) })
}

// Ignore calls f and drops its error, for a deferred close whose error says
// nothing about what the test checks: a response body, a connection or
// listener the test is done with, a reader it only read.
func Ignore(f func() error) { _ = f() }
