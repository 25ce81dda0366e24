package pipeline

import (
	"testing"
	"time"
)

// TestOptionZeroValues: 0 means the default in every option, and negative
// values are clamped to the nearest meaningful one; for the durations
// where "none" is meaningful (no linger, abandon at once, commit after
// every batch, never report a stall), a negative value says so (the
// regression: WithBatch(0, ...) divided by zero, WithMaxInFlight(0) never
// fetched, WithRetry(0, 0, 0) spun).
func TestOptionZeroValues(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		opt  Option
		want func(o options) bool
	}{
		{"batch zero", WithBatch(0, 0, 0), func(o options) bool {
			return o.maxRecords == DefaultMaxRecords && o.maxBytes == DefaultMaxBytes && o.linger == DefaultLinger
		}},
		{"batch negative", WithBatch(-5, -1, -1), func(o options) bool { return o.maxRecords == 1 && o.maxBytes == 1 && o.linger == 0 }},
		{"batch set", WithBatch(7, 100, 3*ms), func(o options) bool { return o.maxRecords == 7 && o.maxBytes == 100 && o.linger == 3*ms }},
		{"workers zero", WithWorkers(0), func(o options) bool { return o.workers == DefaultWorkers }},
		{"workers negative", WithWorkers(-3), func(o options) bool { return o.workers == 1 }},
		{"max in flight zero", WithMaxInFlight(0), func(o options) bool { return o.maxInFlight == DefaultMaxInFlight }},
		{"max in flight negative", WithMaxInFlight(-1), func(o options) bool { return o.maxInFlight == 1 }},
		{"retry zero", WithRetry(0, 0, 0), func(o options) bool {
			return o.retryInitial == DefaultRetryInitial && o.retryMax == DefaultRetryMax && o.retryAttempts == 0
		}},
		{"retry negative", WithRetry(-ms, -ms, -1), func(o options) bool {
			return o.retryInitial == minRetryBackoff && o.retryMax == DefaultRetryMax && o.retryAttempts == 0
		}},
		{"retry max below initial", WithRetry(50*ms, 10*ms, 3), func(o options) bool {
			return o.retryInitial == 50*ms && o.retryMax == 50*ms && o.retryAttempts == 3
		}},
		{"shutdown timeout zero", WithShutdownTimeout(0), func(o options) bool { return o.shutdownTimeout == DefaultShutdownTimeout }},
		{"shutdown timeout negative: at once", WithShutdownTimeout(-1), func(o options) bool { return o.shutdownTimeout == 0 }},
		{"commit interval zero", WithCommitInterval(0), func(o options) bool { return o.commitInterval == DefaultCommitInterval }},
		{"commit interval negative: every batch", WithCommitInterval(-1), func(o options) bool { return o.commitInterval == 0 }},
		{"stall timeout zero", WithStallTimeout(0), func(o options) bool { return o.stallTimeout == DefaultStallTimeout }},
		{"stall timeout negative: never", WithStallTimeout(-1), func(o options) bool { return o.stallTimeout == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New("t", nil, nil, tc.opt)
			if !tc.want(p.o) {
				t.Fatalf("options %+v", p.o)
			}
		})
	}
}
