package pipeline

import (
	"errors"
)

// Transient marks a sink's per-record error as transient: the record was
// not written for a reason that is not the record's fault (the broker is
// unreachable, the topic is missing, a leader moved) and it may be
// written if tried again. The pipeline retries such records, and only
// them, with capped exponential backoff until they are written, until
// retry_attempts runs out or until shutdown; a transient error never goes
// to the error policy. Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

// IsTransient reports whether err, or an error it wraps, was marked with
// Transient.
func IsTransient(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// ErrRecordTooLarge is wrapped by a sink's per-record error when the record
// is over a size limit of the sink or its broker. The dead-letter queue
// then receives the record without its value (and, if still too large,
// without its key and own headers), so that the error can be recorded.
var ErrRecordTooLarge = errors.New("record too large")
