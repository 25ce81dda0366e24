package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Secret is a credential from the config file: a password, a token, a
// client secret. Its value is a literal (after ${ENV} interpolation), or,
// when the whole value is "${file:PATH}", the content of that file, read
// again at each use (each connection's authentication), so a secret
// rotated in the file (as container platforms mount them) is picked up
// without a restart. A Secret never shows its value: String, the text
// and JSON encodings and slog all give "[redacted]" (or the file's path).
type Secret struct {
	raw   string // as written, before interpolation
	value string // a literal's value
	file  string // the file of a "${file:PATH}" value
	set   bool
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Secret) UnmarshalText(b []byte) error {
	*s = Secret{raw: string(b), value: string(b), set: true}
	return nil
}

// SecretValue returns a Secret with a literal value (for code and tests
// that build a Config).
func SecretValue(v string) Secret { return Secret{value: v, set: true} }

// SecretFile returns a Secret read from path at each use.
func SecretFile(path string) Secret { return Secret{file: path, set: true} }

// IsZero reports whether the key was not set (or set to "").
func (s Secret) IsZero() bool { return !s.set || s.file == "" && s.value == "" }

// File returns the file the secret is read from, "" for a literal.
func (s Secret) File() string { return s.file }

// Value returns the secret: the literal, or the file's content without
// its trailing newline, read now. The error names the file, never its
// content.
func (s Secret) Value() (string, error) {
	if s.file == "" {
		return s.value, nil
	}
	return readSecretFile(s.file)
}

func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return "", fmt.Errorf("secret file %s: %w", path, pe.Err)
		}
		return "", fmt.Errorf("secret file %s: %w", path, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("secret file %s is empty", path)
	}
	return v, nil
}

func (s Secret) describe() string {
	switch {
	case s.file != "":
		return "[redacted: from file " + s.file + "]"
	case s.IsZero():
		return ""
	}
	return "[redacted]"
}

// String implements fmt.Stringer without the value.
func (s Secret) String() string { return s.describe() }

// GoString implements fmt.GoStringer without the value.
func (s Secret) GoString() string { return "config.Secret(" + s.describe() + ")" }

// MarshalText implements encoding.TextMarshaler without the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.describe()), nil }

// LogValue implements slog.LogValuer without the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.describe()) }

// interpolate resolves s after the file is decoded: ${ENV} references
// anywhere; a value that is exactly ${file:PATH} becomes a file secret
// (checked to be readable now, read at each use); ${file:PATH} inside a
// longer value is read now.
func (s *Secret) interpolate(c *Config, lookup func(string) (string, bool)) error {
	if !s.set {
		return nil
	}
	if m := wholeFileRE.FindStringSubmatch(strings.TrimSpace(s.raw)); m != nil {
		s.file, s.value = c.Resolve(m[1]), ""
		_, err := readSecretFile(s.file)
		return err
	}
	v, err := c.expand(s.raw, lookup)
	if err != nil {
		return err
	}
	s.value = v
	return nil
}
