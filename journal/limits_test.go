package journal

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The Go API's side of TestHandlerEventOverRecordLimit and
// TestHandlerUnknownTopic: the errors wrap ErrTooLarge and ErrUnknownTopic
// and come before anything is written or waited for.
func TestAppendLimits(t *testing.T) {
	h := newHarness(t, 1)
	key := Key{Topic: h.topic, ID: "limits"}
	big := []Event{{SeqNr: 1, PayloadType: PayloadText, Payload: []byte(strings.Repeat("x", 5<<20))}}
	if _, err := h.j.Append(h.ctx, key, big); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1000012") {
		t.Fatalf("append of a 5 MB event: %v, want ErrTooLarge naming the 1000012-byte limit", err)
	}
	if p := h.pointer(key); p != 0 {
		t.Fatalf("pointer %d after a refused append", p)
	}
	missing := Key{Topic: h.topic + "-missing", ID: "x"}
	start := time.Now()
	_, err := h.j.Append(h.ctx, missing, ev(1))
	if !errors.Is(err, ErrUnknownTopic) || time.Since(start) > 3*time.Second {
		t.Fatalf("append to a missing topic: %v after %v, want ErrUnknownTopic at once", err, time.Since(start))
	}
	if _, err := h.j.Read(h.ctx, missing, 1, func(Event) error { return nil }); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("read of a missing topic: %v", err)
	}
	for _, k := range []Key{{Topic: h.topic, ID: ""}, {Topic: h.topic, ID: strings.Repeat("i", MaxIDBytes+1)}, {Topic: h.topic, ID: "\xff"}, {Topic: "a/b", ID: "x"}} {
		if _, err := h.j.Append(h.ctx, k, ev(1)); !errors.Is(err, ErrInvalid) {
			t.Errorf("append to %q: %v, want ErrInvalid", k, err)
		}
	}
}
