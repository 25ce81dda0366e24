package plugins

import "errors"

// ErrTransient marks a whole-batch error that is not the records' fault: a
// service the stage depends on (a schema registry, a database) is down,
// slow or refusing. The pipeline retries the batch with backoff instead of
// isolating records, and never turns it into a verdict on a record.
var ErrTransient = errors.New("transient")

// Transient wraps err so that errors.Is(err, ErrTransient) holds, as well
// as errors.Is and errors.As for err itself. Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return transientError{err}
}

// IsTransient reports whether err is marked transient.
func IsTransient(err error) bool { return errors.Is(err, ErrTransient) }

type transientError struct{ err error }

func (e transientError) Error() string   { return e.err.Error() }
func (e transientError) Unwrap() []error { return []error{e.err, ErrTransient} }
