package wait

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      time.Duration
		cancel time.Duration // after this long; 0: never
		want   error
		took   time.Duration
	}{
		{name: "full", d: time.Second, want: nil, took: time.Second},
		{name: "cancelled", d: time.Hour, cancel: time.Second, want: context.Canceled, took: time.Second},
		{name: "zero", d: 0, want: nil},
		{name: "negative", d: -time.Second, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancel > 0 {
					time.AfterFunc(tc.cancel, cancel)
				}
				start := time.Now()
				if err := Sleep(ctx, tc.d); !errors.Is(err, tc.want) {
					t.Fatalf("Sleep(%s) = %v, want %v", tc.d, err, tc.want)
				}
				if took := time.Since(start); took != tc.took {
					t.Fatalf("Sleep(%s) took %s, want %s", tc.d, took, tc.took)
				}
			})
		})
	}
}

func TestSleepDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a done context = %v, want context.Canceled", err)
	}
}

func TestWithStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop := make(chan struct{})
		ctx, cancel := WithStop(t.Context(), stop)
		defer cancel()
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatalf("context done before stop closed: %v", ctx.Err())
		}
		close(stop)
		synctest.Wait()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("after stop closed, ctx.Err() = %v, want context.Canceled", ctx.Err())
		}
	})
}

func TestWithStopParentDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancelParent := context.WithCancel(t.Context())
		ctx, cancel := WithStop(parent, make(chan struct{}))
		defer cancel()
		cancelParent()
		synctest.Wait() // the watching goroutine has ended, or synctest reports it
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("after the parent ended, ctx.Err() = %v, want context.Canceled", ctx.Err())
		}
	})
}

func TestWithStopCancelEndsWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cancel := WithStop(t.Context(), make(chan struct{}))
		cancel()
		// synctest.Test fails if the goroutine watching stop is still
		// blocked when the bubble's function returns.
	})
}

func TestGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Go(func() { time.Sleep(time.Second) })
		start := time.Now()
		if err := Group(t.Context(), &wg); err != nil || time.Since(start) != time.Second {
			t.Fatalf("Group = %v after %s, want nil after 1s", err, time.Since(start))
		}
	})
}

func TestGroupContextDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		release := make(chan struct{})
		wg.Go(func() { <-release })
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if err := Group(ctx, &wg); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("Group = %v after %s, want context.DeadlineExceeded after 1s", err, time.Since(start))
		}
		close(release) // the work and the goroutine waiting for it end
	})
}

// TestClosed: a close that ends before the deadline, one that ends within
// the grace after it, and one that never ends (left after the grace), on
// the fake clock.
func TestClosed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		closes time.Duration // when done closes; 0: never
		want   bool
		took   time.Duration
	}{
		{name: "before the deadline", closes: 500 * time.Millisecond, want: true, took: 500 * time.Millisecond},
		{name: "in the grace", closes: time.Second + 50*time.Millisecond, want: true, took: time.Second + 50*time.Millisecond},
		{name: "never", want: false, took: time.Second + CloseGrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				done := make(chan struct{})
				if tc.closes > 0 {
					time.AfterFunc(tc.closes, func() { close(done) })
				}
				start := time.Now()
				if got := Closed(ctx, done, CloseGrace); got != tc.want {
					t.Errorf("Closed = %v, want %v", got, tc.want)
				}
				if took := time.Since(start); took != tc.took {
					t.Errorf("took %v, want %v", took, tc.took)
				}
			})
		})
	}
}
