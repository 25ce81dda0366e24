package native

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamd/streamd/plugins"
)

// TestCrashWindowAndBackoff: the wait before a restart doubles from
// backoffMin to backoffMax with each crash; maxCrashes crashes within the
// window fail the plugin, and a crash older than the window no longer
// counts. On synctest's fake clock, with the default one-minute window
// (real processes crashing are TestRepeatedCrashesFail's).
func TestCrashWindowAndBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSupervisor("p", "/p", nil, nil, plugins.Options{}, supervision{
			backoffMin: 100 * time.Millisecond, backoffMax: 400 * time.Millisecond, maxCrashes: 3, window: time.Minute,
		})
		cause := errors.New("exit status 2")
		for i, step := range []struct {
			after   time.Duration // since the crash before
			failed  bool
			backoff time.Duration
		}{
			{0, false, 100 * time.Millisecond},
			{30 * time.Second, false, 200 * time.Millisecond},
			// The first crash is a minute old: two in the window.
			{30 * time.Second, false, 400 * time.Millisecond},
			{29 * time.Second, true, 400 * time.Millisecond}, // three within 59 s
		} {
			time.Sleep(step.after)
			if failed := s.crashed(cause); failed != step.failed || s.backoff != step.backoff {
				t.Fatalf("crash %d (%v after the one before): failed %v, backoff %v; want %v, %v",
					i+1, step.after, failed, s.backoff, step.failed, step.backoff)
			}
		}
		if err := s.health(); err == nil || !strings.Contains(err.Error(), "failed: 3 crashes within 1m0s, last: exit status 2") {
			t.Fatalf("health: %v", err)
		}
	})
}
