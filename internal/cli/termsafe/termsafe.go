package termsafe

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// escaped reports whether r is shown as an escape: C0 controls (tab and
// newline too: a record is one field of a line), DEL, C1 controls, the
// Unicode bidirectional controls and the line and paragraph separators.
func escaped(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// String returns s with every control character (C0 including tab, CR
// and newline, DEL, C1), every bidirectional control and every byte that
// is not UTF-8 shown as an escape: \x1b, \x7f, \u009b, \u202e, \xff. It
// returns s itself when there is nothing to escape.
func String(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || escaped(r) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && escaped(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Bytes is String of b.
func Bytes(b []byte) string { return String(string(b)) }

// Writer writes JSON text to w with what String escapes written as JSON
// escapes (\u001b, \u009b, \u202e; a byte that is not UTF-8 as \ufffd),
// so that the text stays the same JSON: JSON has no raw control
// characters in its strings (encoding/json escapes C0, not DEL, C1 or the
// bidirectional controls), and outside strings only its white space,
// which is kept. Call Flush at the end (a character cut between two
// writes is held until the next).
type Writer struct {
	w       io.Writer
	pending []byte
	buf     []byte
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write implements io.Writer.
func (t *Writer) Write(p []byte) (int, error) {
	in := p
	if len(t.pending) > 0 {
		in = append(t.pending, p...)
		t.pending = nil
	}
	out := t.buf[:0]
	i := 0
	for i < len(in) {
		c := in[i]
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' || c == '\r' {
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		switch {
		case r == utf8.RuneError && n <= 1 && !utf8.FullRune(in[i:]):
			t.pending = append(t.pending, in[i:]...) // cut: the rest comes with the next write
			i = len(in)
			continue
		case r == utf8.RuneError && n <= 1:
			out = append(out, `\ufffd`...)
		case escaped(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, in[i:i+n]...)
		}
		i += n
	}
	t.buf = out
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held of a character cut at the end of the last
// write, as \ufffd.
func (t *Writer) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	t.pending = nil
	_, err := io.WriteString(t.w, `\ufffd`)
	return err
}

// IsTerminal reports whether w is a character device (a terminal; also
// /dev/null, where escaping does no harm).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
