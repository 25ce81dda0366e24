package config

import (
	"strings"
	"time"
)

// Defaults that belong to streamd's config, not to a library package (the
// others are the library's Default* constants: pipeline.DefaultWorkers,
// plugins.DefaultTimeout, kafka.DefaultPartitions, ...).
const (
	// DefaultWatch is how often Wasm plugin files are checked for changes
	// ([plugins] watch).
	DefaultWatch = time.Second
	// DefaultLoadTimeout bounds loading one plugin ([plugins]
	// load_timeout).
	DefaultLoadTimeout = 2 * time.Minute
	// DefaultKeys is the number of distinct keys of a generate source.
	DefaultKeys = 1000
)

// Limits of a config file.
const (
	// MaxDepth bounds how deeply a file may nest tables, arrays and dotted
	// keys. It is checked before the TOML parser runs, whose time grows with
	// the square of the depth (5,000 nested inline tables took 20 s).
	MaxDepth = 64
	// MaxErrors is how many problems an error lists; the rest are counted.
	MaxErrors = 20
)

// scanDepth scans TOML source for how deeply it nests: each table, array
// and dotted-key part is a level, the file itself the first, so `a = 1` is
// 1 deep and `[a.b]` then `c = [{d = 1}]` is 5 deep (the file, a, b, the
// array, its table). It stops at the first line that goes deeper than
// limit and returns that line (0 if none) with the depth reached.
//
// It is a scanner, not a parser: it follows strings, comments, headers,
// keys and brackets well enough to count, and never finds a file that the
// parser accepts deeper than it is (FuzzScanDepth); it runs on files the
// parser would refuse too, and counts what it can.
func scanDepth(src string, limit int) (depth, line int) {
	s := scanner{src: src, limit: limit, ln: 1, arrays: map[string]bool{}}
	s.file()
	return s.max, s.over
}

type scanner struct {
	src    string
	i, ln  int
	limit  int
	max    int
	over   int             // the line where limit was passed, 0 if not
	arrays map[string]bool // paths of [[array]] headers, as written
}

// reach notes depth d; it reports whether the scan must stop.
func (s *scanner) reach(d int) bool {
	s.max = max(s.max, d)
	if d > s.limit && s.over == 0 {
		s.over = s.ln
	}
	return s.over != 0
}

func (s *scanner) done() bool { return s.i >= len(s.src) || s.over != 0 }

// blank skips spaces and tabs; with lines, also newlines and comments.
func (s *scanner) blank(lines bool) {
	for s.i < len(s.src) {
		switch s.src[s.i] {
		case ' ', '\t', '\r':
			s.i++
		case '\n':
			if !lines {
				return
			}
			s.ln++
			s.i++
		case '#':
			if !lines {
				return
			}
			for s.i < len(s.src) && s.src[s.i] != '\n' {
				s.i++
			}
		default:
			return
		}
	}
}

// toEOL skips the rest of the line (strings on it included).
func (s *scanner) toEOL() {
	for s.i < len(s.src) && s.src[s.i] != '\n' {
		if c := s.src[s.i]; c == '"' || c == '\'' {
			s.str()
			continue
		}
		if s.src[s.i] == '#' {
			for s.i < len(s.src) && s.src[s.i] != '\n' {
				s.i++
			}
			return
		}
		s.i++
	}
}

func (s *scanner) file() {
	base := 1 // depth of the keys of the current table
	for !s.done() {
		s.blank(true)
		if s.done() {
			return
		}
		if s.src[s.i] == '[' {
			s.i++
			array := s.i < len(s.src) && s.src[s.i] == '['
			if array {
				s.i++
			}
			parts := s.key()
			path, d := "", 1
			for j, p := range parts {
				if j > 0 {
					path += "."
				}
				path += p
				d++
				if s.arrays[path] || array && j == len(parts)-1 {
					d++ // an array of tables, then its element
				}
			}
			if array {
				s.arrays[path] = true
			}
			base = d
			if s.reach(d - 1) {
				return
			}
			s.toEOL()
			continue
		}
		s.keyValue(base) // if not a key, the parser will say what
		s.toEOL()
	}
}

// keyValue skips a key = value pair whose key's first part is at depth d
// (each further part is a level deeper). It reports false if there is no
// key at s.i.
func (s *scanner) keyValue(d int) bool {
	parts := s.key()
	if len(parts) == 0 {
		return false
	}
	d += len(parts) - 1
	if s.reach(d) {
		return true
	}
	s.blank(false)
	if s.i < len(s.src) && s.src[s.i] == '=' {
		s.i++
		s.value(d)
	}
	return true
}

// key reads a dotted key, returning its parts as written.
func (s *scanner) key() []string {
	var parts []string
	for {
		s.blank(false)
		if s.i >= len(s.src) {
			return parts
		}
		start := s.i
		switch c := s.src[s.i]; {
		case c == '"' || c == '\'':
			s.str()
		case bare(c):
			for s.i < len(s.src) && bare(s.src[s.i]) {
				s.i++
			}
		default:
			return parts
		}
		parts = append(parts, s.src[start:s.i])
		s.blank(false)
		if s.i < len(s.src) && s.src[s.i] == '.' {
			s.i++
			continue
		}
		return parts
	}
}

func bare(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// str skips a string of any of TOML's four kinds.
func (s *scanner) str() {
	q := s.src[s.i]
	triple := string([]byte{q, q, q})
	if strings.HasPrefix(s.src[s.i:], triple) {
		s.i += 3
		for s.i < len(s.src) {
			switch c := s.src[s.i]; {
			case c == '\n':
				s.ln++
			case c == '\\' && q == '"' && s.i+1 < len(s.src):
				s.i++ // the escaped character, a newline included
				if s.src[s.i] == '\n' {
					s.ln++
				}
			case strings.HasPrefix(s.src[s.i:], triple):
				s.i += 3
				for k := 0; k < 2 && s.i < len(s.src) && s.src[s.i] == q; k++ {
					s.i++ // up to two quotes may end the content
				}
				return
			}
			s.i++
		}
		return
	}
	s.i++
	for s.i < len(s.src) && s.src[s.i] != q && s.src[s.i] != '\n' {
		if q == '"' && s.src[s.i] == '\\' && s.i+1 < len(s.src) && s.src[s.i+1] != '\n' {
			s.i++
		}
		s.i++
	}
	if s.i < len(s.src) && s.src[s.i] == q {
		s.i++
	}
}

// items skips the items of an array or inline table up to and including
// the closing bracket end, calling item at the start of each.
func (s *scanner) items(end byte, item func()) {
	for !s.done() {
		s.blank(true)
		if s.done() {
			return
		}
		switch s.src[s.i] {
		case end:
			s.i++
			return
		case ',':
			s.i++
		default:
			item()
		}
	}
}

// value skips one value owned by a key or array at depth d.
func (s *scanner) value(d int) {
	s.blank(false)
	if s.done() {
		return
	}
	switch s.src[s.i] {
	case '[':
		s.i++
		if s.reach(d + 1) {
			return
		}
		s.items(']', func() {
			before := s.i
			s.value(d + 1)
			if s.i == before {
				s.i++ // not a value: skip it
			}
		})
	case '{':
		s.i++
		s.items('}', func() {
			if !s.keyValue(d + 1) {
				s.i++ // not a key: skip it
			}
		})
	case '"', '\'':
		s.str()
	default:
		for s.i < len(s.src) {
			switch s.src[s.i] {
			case ',', ']', '}', '\n', '#':
				return
			}
			s.i++
		}
	}
}
