package pipeline

import (
	"errors"
	"strings"

	"github.com/streamd/streamd/plugins"
)

// Error kinds: how a record failed, in a dead letter's streamd-error-kind
// header, Rejection.Kind, Status.ErrorKinds and the kind label of
// streamd_stage_errors_total. `streamd plugin test` names the same kinds.
const (
	// KindRejected: the plugin or the sink rejected the record (a
	// per-record error: ERR_RECORD, a sink's verdict such as a record too
	// large for the topic).
	KindRejected = "rejected"
	// KindTrap: the call with the record alone crashed (plugins.ErrTrap).
	KindTrap = "trap"
	// KindTimeout: the call with the record alone ran past the plugin's
	// timeout (plugins.ErrTimeout).
	KindTimeout = "timeout"
	// KindMemory: the call with the record alone needed more memory than
	// the plugin's limit (plugins.ErrMemoryLimit).
	KindMemory = "memory"
	// KindFailed: the call with the record alone failed otherwise: the
	// plugin answered ERR_BATCH or ERR_INTERNAL, or a reply that does not
	// parse.
	KindFailed = "failed"
)

// Kinds are the error kinds, in the order reports list them.
var Kinds = []string{KindRejected, KindTrap, KindTimeout, KindMemory, KindFailed}

func kindIndex(kind string) int {
	for i, k := range Kinds {
		if k == kind {
			return i
		}
	}
	return len(Kinds) - 1
}

// ErrorKind returns the kind of a record's error: KindTrap, KindTimeout or
// KindMemory for a call that failed that way, KindFailed for another
// failed call (one made with RecordCallError), KindRejected for any other
// error.
func ErrorKind(err error) string {
	switch {
	case errors.Is(err, plugins.ErrMemoryLimit):
		return KindMemory
	case errors.Is(err, plugins.ErrTimeout):
		return KindTimeout
	case errors.Is(err, plugins.ErrTrap):
		return KindTrap
	}
	var ce *callError
	if errors.As(err, &ce) {
		return KindFailed
	}
	return KindRejected
}

// callError is the error of a record whose call, with the record alone,
// failed as a whole.
type callError struct{ err error }

func (e *callError) Error() string { return CallCause(e.err) }
func (e *callError) Unwrap() error { return e.err }

// RecordCallError returns the error of one record whose call, with that
// record alone, failed as a whole with err: its text is CallCause(err),
// ErrorKind says how it failed, and errors.Is sees err.
func RecordCallError(err error) error {
	if err == nil {
		return nil
	}
	var ce *callError
	if errors.As(err, &ce) {
		return err
	}
	return &callError{err}
}

// CallCause words a failed call's error as one record's: the cause first.
// For a crash, a timeout or the memory limit, that is the error that says
// so (plugins.ErrTrap, ErrTimeout or ErrMemoryLimit and what follows:
// "plugin crashed: panicked at src/lib.rs:12:5: ..."), without the words
// around it that the loader put there for a whole batch ("plugin p:
// TRANSFORM: batch failed: "); for another failure, the error with "batch
// failed" (the loaders' wording) said as "call failed".
func CallCause(err error) string {
	for _, k := range []error{plugins.ErrMemoryLimit, plugins.ErrTimeout, plugins.ErrTrap} {
		if e := innermostWrapping(err, k); e != nil {
			return e.Error()
		}
	}
	return strings.Replace(err.Error(), "batch failed", "call failed", 1)
}

// innermostWrapping returns the deepest error in err's tree that wraps
// target (and is not target itself), or nil.
func innermostWrapping(err, target error) error {
	if err == nil || err == target || !errors.Is(err, target) {
		return nil
	}
	var kids []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		kids = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		kids = u.Unwrap()
	}
	for _, k := range kids {
		if e := innermostWrapping(k, target); e != nil {
			return e
		}
	}
	return err
}
