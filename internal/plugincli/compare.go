package plugincli

import (
	"bytes"
	"fmt"
)

// Compare compares run output got with the expected output want, line by
// line. Record lines match when their topic, key, value, headers (in order),
// timestamp, partition and offset are equal; error lines match when both are
// errors with the same input_offset (the messages are free text), and
// written lines when their input_offset is the same. It returns
// "" when they match, or a report of the first differing lines. An error
// means a line of want does not parse.
func Compare(got, want []byte) (string, error) {
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
		if err != nil || !sameLine(g, w) {
			return fmt.Sprintf("line %d differs\n  got:  %s\n  want: %s\n", i+1, gl[i], wl[i]), nil
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

func sameLine(a, b jsonLine) bool {
	if a.IsErr || b.IsErr || a.Written || b.Written {
		return a.IsErr == b.IsErr && a.Written == b.Written && a.InputOffset == b.InputOffset
	}
	x, y := &a.Rec, &b.Rec
	if x.Topic != y.Topic || x.Partition != y.Partition || x.Offset != y.Offset ||
		!x.Timestamp.Equal(y.Timestamp) || !sameBytes(x.Key, y.Key) || !sameBytes(x.Value, y.Value) ||
		len(x.Headers) != len(y.Headers) {
		return false
	}
	for i := range x.Headers {
		if x.Headers[i].Key != y.Headers[i].Key || !sameBytes(x.Headers[i].Value, y.Headers[i].Value) {
			return false
		}
	}
	return true
}

// sameBytes is bytes.Equal that also tells null from empty.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}
