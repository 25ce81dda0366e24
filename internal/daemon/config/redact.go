package config

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// interpolation is a value a ${ENV} or ${file:PATH} reference put into the
// config.
type interpolation struct {
	ref, value string
}

// noteInterpolated remembers that ref put value into the config.
func (c *Config) noteInterpolated(ref, value string) {
	if value == "" {
		return
	}
	for _, in := range c.interpolated {
		if in.value == value {
			return
		}
	}
	c.interpolated = append(c.interpolated, interpolation{ref, value})
	// Longest first: a value that holds another is replaced whole.
	slices.SortStableFunc(c.interpolated, func(a, b interpolation) int { return cmp.Compare(len(b.value), len(a.value)) })
}

// Redact returns s with every value that a ${ENV} or ${file:PATH}
// reference put into the config replaced by "<from ${ENV}>" or
// "<from ${file:PATH}>", wherever it came from and whatever key it sits
// under: for errors and status that may quote config values (a secret
// file's content under a key that is not a secret field, a broker
// address from the environment). The value is also found as %q quotes
// it. A value shorter than 4 bytes is replaced only where it stands
// alone (not inside a longer word or number), so that "1" from the
// environment does not take every digit 1 with it.
func (c *Config) Redact(s string) string {
	if c == nil {
		return s
	}
	for _, in := range c.interpolated {
		ph := "<from " + in.ref + ">"
		s = replaceValue(s, in.value, ph)
		if q := strconv.Quote(in.value); q[1:len(q)-1] != in.value {
			s = replaceValue(s, q[1:len(q)-1], ph)
		}
	}
	return s
}

// RedactError is err with its text redacted (Redact), or err itself when
// there is nothing to hide. The error's parts (errors.Join) are redacted
// each; an *Error keeps its file, line and key.
func (c *Config) RedactError(err error) error {
	if err == nil || c == nil || len(c.interpolated) == 0 {
		return err
	}
	if r := c.Redact(err.Error()); r == err.Error() {
		return err
	}
	var e *Error
	if errors.As(err, &e) && e.Error() == err.Error() {
		cp := *e
		cp.Msg = c.Redact(e.Msg)
		return &cp
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var parts []error
		for _, p := range j.Unwrap() {
			parts = append(parts, c.RedactError(p))
		}
		return errors.Join(parts...)
	}
	return errors.New(c.Redact(err.Error()))
}

// replaceValue replaces v in s by ph; a v shorter than 4 bytes only
// where neither neighbour is a letter or a digit.
func replaceValue(s, v, ph string) string {
	if len(v) >= 4 {
		return strings.ReplaceAll(s, v, ph)
	}
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, v)
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		before, _ := utf8.DecodeLastRuneInString(rest[:i])
		after, _ := utf8.DecodeRuneInString(rest[i+len(v):])
		if i == 0 && b.Len() > 0 {
			before, _ = utf8.DecodeLastRuneInString(b.String())
		}
		alone := !word(before) && !word(after)
		b.WriteString(rest[:i])
		if alone {
			b.WriteString(ph)
		} else {
			b.WriteString(v)
		}
		rest = rest[i+len(v):]
	}
}

func word(r rune) bool { return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r)) }
