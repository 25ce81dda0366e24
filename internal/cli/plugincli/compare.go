package plugincli

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/streamd/streamd/record"
)

// CompareOptions say how strictly Compare matches error lines.
type CompareOptions struct {
	// Messages also compares error messages: an expected error line's
	// "error" text, when not empty, must be part of the actual message.
	Messages bool
	// ContainsHeaders are headers whose expected value need only be part of
	// the actual one (a dead letter's streamd-error).
	ContainsHeaders []string
	// OptionalHeaders are headers an expected record line may leave out:
	// then the actual line's are not compared (a dead letter's
	// streamd-error-detail, a stack trace that changes with each build,
	// and streamd-error-kind, which expected files written before it lack).
	OptionalHeaders []string
}

// Compare compares run output got with the expected output want, line by
// line, as Compare with the zero CompareOptions does.
func Compare(got, want []byte) (string, error) {
	return CompareWith(got, want, CompareOptions{})
}

// CompareWith compares run output got with the expected output want, line
// by line. Record lines match when their key, value, headers (in order)
// and timestamp are equal, and their topic, partition and offset where the
// expected line gives them (run always writes partition and offset; a
// fixture written by hand may leave them out). Error lines match when
// both are errors of the same kind (an expected line without "kind" means
// "rejected": a record the plugin rejected, not a crash, a timeout or a
// memory limit) for the same input_offset (when the expected line gives
// one), and, with o.Messages, when the expected message is part of the
// actual one. Written lines match when their input_offset is the same (when
// given). It returns "" when the outputs match, or a report of the first
// lines that differ. An error means a line of want does not parse.
func CompareWith(got, want []byte, o CompareOptions) (string, error) {
	gl, wl := lines(got), lines(want)
	for i := 0; i < max(len(gl), len(wl)); i++ {
		switch {
		case i >= len(gl):
			return fmt.Sprintf("line %d: output ends early\n  want: %s\n", i+1, wl[i]), nil
		case i >= len(wl):
			return fmt.Sprintf("line %d: unexpected extra output\n  got:  %s\n", i+1, gl[i]), nil
		}
		w, err := decodeLine(wl[i])
		if err != nil {
			return "", fmt.Errorf("line %d: %w", i+1, err)
		}
		g, err := decodeLine(gl[i])
		if err != nil {
			return fmt.Sprintf("line %d does not parse (%v)\n  got:  %s\n  want: %s\n", i+1, err, gl[i], wl[i]), nil
		}
		if why := differs(g, w, o); why != "" {
			return fmt.Sprintf("line %d differs: %s\n  got:  %s\n  want: %s\n", i+1, why, gl[i], wl[i]), nil
		}
	}
	return "", nil
}

func lines(b []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// differs says how got differs from want, or "".
func differs(got, want jsonLine, o CompareOptions) string {
	switch {
	case want.IsErr && !got.IsErr:
		return "want an error"
	case want.Written && !got.Written:
		return "want a written record"
	case !want.IsErr && !want.Written && (got.IsErr || got.Written):
		if got.IsErr {
			return fmt.Sprintf("want a record, got an error (%s)", got.Kind)
		}
		return "want a record"
	case want.HasOffset && (got.IsErr || got.Written) && got.InputOffset != want.InputOffset:
		return fmt.Sprintf("input_offset %d, want %d", got.InputOffset, want.InputOffset)
	case want.IsErr && got.Kind != want.Kind:
		return fmt.Sprintf("error of kind %s, want %s", got.Kind, want.Kind)
	case want.IsErr && o.Messages && !strings.Contains(got.Err, want.Err):
		return "the message does not contain the expected one"
	case want.IsErr || want.Written:
		return ""
	}
	x, y := &got.Rec, &want.Rec
	if len(o.OptionalHeaders) > 0 {
		hs := x.Headers
		x = &record.Record{Topic: x.Topic, Partition: x.Partition, Offset: x.Offset, Timestamp: x.Timestamp, Key: x.Key, Value: x.Value}
		for _, h := range hs {
			if _, given := y.Header(h.Key); given || !slices.Contains(o.OptionalHeaders, h.Key) {
				x.Headers = append(x.Headers, h)
			}
		}
	}
	switch {
	case want.Given.topic && x.Topic != y.Topic:
		return "topic"
	case want.Given.partition && x.Partition != y.Partition:
		return "partition"
	case want.Given.offset && x.Offset != y.Offset:
		return "offset"
	case !x.Timestamp.Equal(y.Timestamp):
		return "timestamp"
	case !sameBytes(x.Key, y.Key):
		return "key"
	case !sameBytes(x.Value, y.Value):
		return "value"
	case len(x.Headers) != len(y.Headers):
		return "headers"
	}
	for i := range x.Headers {
		g, w := x.Headers[i], y.Headers[i]
		switch {
		case g.Key != w.Key:
			return "headers"
		case slices.Contains(o.ContainsHeaders, w.Key) && w.Value != nil && g.Value != nil:
			if !bytes.Contains(g.Value, w.Value) {
				return "header " + w.Key
			}
		case !sameBytes(g.Value, w.Value):
			return "header " + w.Key
		}
	}
	return ""
}

// sameBytes is bytes.Equal that also tells null from empty.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}
