package plugins

import "errors"

// ErrTransient marks an error that is not the records' fault: a service
// the stage or sink depends on (a broker, a schema registry, a database) is
// down, slow or refusing, and the same call may succeed later. The
// pipeline retries what failed, with capped exponential backoff
// (retry_initial, retry_max, retry_attempts) until it succeeds or the
// pipeline shuts down, and never turns it into a verdict on a record:
//   - a Transformer's or Codec's batch error: the same batch is given to
//     the stage again (it is not split to find a poison record); a
//     Result's Err: that record is given to the stage again;
//   - a Sink's per-record error: that record alone is written again
//     (records already written are not sent twice); a whole-batch Sink
//     error is always retried this way, marked or not.
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
