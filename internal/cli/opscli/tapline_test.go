package opscli

import (
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/daemon/console"
	"github.com/streamd/streamd/internal/daemon/recview"
)

// TestTapLineEscaped: `streamd tap` prints a sampled record's key, values
// and errors with every control character escaped visibly.
func TestTapLineEscaped(t *testing.T) {
	const hostile = "a\x1b[2J\x1b]0;PWNED\x07\u009b31m\u202eb\r\nforged"
	ev := &console.TapEvent{Stage: "s", In: recview.Record{Topic: "t", Key: recview.Bytes([]byte(hostile), 0), Value: recview.Bytes([]byte(hostile), 0)},
		Out: []recview.Record{{Value: recview.Bytes([]byte(hostile), 0)}}}
	rej := &console.TapEvent{Stage: "s", In: ev.In, Err: "rejected " + hostile}
	for _, e := range []*console.TapEvent{ev, rej} {
		line := tapLine(e, false)
		for _, c := range []string{"\x1b", "\x07", "\r", "\n", "\u009b", "\u202e"} {
			if strings.Contains(line, c) {
				t.Errorf("tap line has %q: %q", c, line)
			}
		}
		if !strings.Contains(line, `\x1b[2J`) {
			t.Errorf("tap line does not show the escape: %q", line)
		}
		if raw := tapLine(e, true); !strings.Contains(raw, "\x1b[2J") || strings.Contains(raw, "\n") {
			t.Errorf("--raw: %q, want the bytes as they are but for line breaks", raw)
		}
	}
}
