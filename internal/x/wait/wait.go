package wait

import (
	"context"
	"sync"
	"time"
)

// Sleep waits for d or until ctx is done, whichever comes first, and
// returns ctx.Err() in the latter case. A d of zero or less returns nil at
// once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WithStop returns a copy of ctx that is also cancelled when stop is
// closed, so that a call blocked on it returns as soon as either ends. The
// caller must call cancel when done with the context, which also ends the
// goroutine that watches stop.
func WithStop(ctx context.Context, stop <-chan struct{}) (_ context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Group waits until wg's counter is zero or ctx is done, whichever comes
// first, and returns ctx.Err() in the latter case; what wg counts then goes
// on in the background (and a goroutine waiting for it).
func Group(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CloseGrace is how long Closed waits past its context for a close that
// does not watch it (a plugin, a client blocked on a broker) before it
// leaves that close to finish in the background.
const CloseGrace = 100 * time.Millisecond

// Closed waits until done is closed or, once ctx is done, grace more has
// passed, and reports whether done was closed: the wait of a close
// bounded by a shutdown deadline, which ends by the deadline (plus grace)
// whatever the close does.
func Closed(ctx context.Context, done <-chan struct{}, grace time.Duration) bool {
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
