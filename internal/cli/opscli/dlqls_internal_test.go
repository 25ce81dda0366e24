package opscli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// TestLsShowsKindAndCause: `dlq ls` shows a dead letter's error kind, and
// its ERROR column starts with the cause (not the words a loader puts
// around a whole call's failure), on one line.
func TestLsShowsKindAndCause(t *testing.T) {
	callErr := fmt.Errorf("plugin orders-downgrade: TRANSFORM: batch failed: %w",
		fmt.Errorf("%w: panicked at src/lib.rs:12:5: boom: wasm error: unreachable\nwasm stack trace:\n\tf()", plugins.ErrTrap))
	d := pipeline.DeadLetter(record.Record{Topic: "in", Partition: 1, Offset: 7, Key: []byte("k")}, "down", "orders-downgrade", pipeline.RecordCallError(callErr))
	d.Partition, d.Offset = 0, 3
	var out bytes.Buffer
	printEntries(&out, "dlq", []dlq.Entry{dlq.FromRecord(d)}, false, dlqFlags{maxBytes: 100})
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "KIND") {
		t.Fatalf("no KIND column:\n%s", out.String())
	}
	if !strings.Contains(lines[1], " trap ") || !strings.Contains(lines[1], "plugin crashed: panicked at src/lib.rs:12:5: boom") ||
		strings.Contains(lines[1], "batch failed") || strings.Contains(lines[1], "stack trace") {
		t.Fatalf("row %q: want kind trap and the cause, without the batch wording or the stack trace", lines[1])
	}
	e := dlq.FromRecord(d)
	if e.Kind != pipeline.KindTrap || !strings.HasPrefix(e.Detail, "wasm stack trace:") {
		t.Fatalf("entry kind %q detail %q", e.Kind, e.Detail)
	}
	if o, err := e.Original("dlq"); err != nil || len(o.Headers) != 2 || o.Headers[0].Key != "streamd-replay-of" || o.Headers[1].Key != "streamd-replay-count" {
		t.Fatalf("original %+v, %v: want only streamd-replay-of and streamd-replay-count", o.Headers, err)
	}
}
