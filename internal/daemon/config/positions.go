package config

import (
	"regexp"
	"strconv"
	"strings"
)

// positions maps key paths to the line that sets them. Paths of arrays of
// tables carry indices: "pipeline[1].source.type".
type positions struct {
	lines map[string]int
	order []string
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// indexPositions scans TOML source for table headers and key assignments.
// It is a line scanner, not a parser: it serves error messages only, and
// the real parse has already accepted the file.
func indexPositions(src string) *positions {
	p := &positions{lines: map[string]int{}}
	cur := map[string]int{}   // resolved array path -> current index
	count := map[string]int{} // resolved array path -> elements seen
	resolve := func(parts []string) string {
		var b strings.Builder
		for i, part := range parts {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(part)
			if idx, ok := cur[b.String()]; ok {
				b.WriteString("[" + strconv.Itoa(idx) + "]")
			}
		}
		return b.String()
	}
	var table string
	inMulti := ""
	for n, line := range strings.Split(src, "\n") {
		ln := n + 1
		s := strings.TrimSpace(line)
		if inMulti != "" {
			if strings.Count(s, inMulti)%2 == 1 {
				inMulti = ""
			}
			continue
		}
		if s == "" || s[0] == '#' {
			continue
		}
		switch {
		case strings.HasPrefix(s, "[["):
			end := strings.Index(s, "]]")
			if end < 0 {
				continue
			}
			parts := splitKey(s[2:end])
			parent := resolve(parts[:len(parts)-1])
			arr := joinKey(parent, parts[len(parts)-1])
			cur[arr] = count[arr]
			count[arr]++
			table = arr + "[" + strconv.Itoa(cur[arr]) + "]"
			p.set(table, ln)
		case s[0] == '[':
			end := strings.Index(s, "]")
			if end < 0 {
				continue
			}
			table = resolve(splitKey(s[1:end]))
			p.set(table, ln)
		default:
			eq := strings.Index(s, "=")
			if eq < 0 {
				continue
			}
			key := joinKey(table, strings.Join(splitKey(s[:eq]), "."))
			p.set(key, ln)
			rest := s[eq+1:]
			for _, q := range []string{`"""`, `'''`} {
				if strings.Count(rest, q)%2 == 1 {
					inMulti = q
				}
			}
		}
	}
	return p
}

func (p *positions) set(path string, line int) {
	if _, ok := p.lines[path]; !ok {
		p.lines[path] = line
		p.order = append(p.order, path)
	}
}

// line returns the line of path, trying its parents when path itself is not
// written in the file; 0 when unknown. A path without indices matches the
// first indexed path of the same shape.
func (p *positions) line(path string) int {
	if p == nil {
		return 0
	}
	for path != "" {
		if l, ok := p.lines[path]; ok {
			return l
		}
		if !strings.Contains(path, "[") {
			for _, k := range p.order {
				if indexRE.ReplaceAllString(k, "") == path {
					return p.lines[k]
				}
			}
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// nth returns the n-th (from 0) path written in the file whose shape,
// without indices, is path: the decoder names a key of an array of tables
// without its index ("pipeline.source.topcis"), once for each table that
// has it, in the order of the file. When the file has fewer, path itself.
func (p *positions) nth(path string, n int) string {
	if p == nil || strings.Contains(path, "[") {
		return path
	}
	for _, k := range p.order {
		if indexRE.ReplaceAllString(k, "") == path {
			if n == 0 {
				return k
			}
			n--
		}
	}
	return path
}

// Line returns the line of the file that sets the key at path, such as
// "pipeline[1].transform[0]" or "admin.listen" (its table's line when the
// key itself is not written), or 0 when unknown.
func (c *Config) Line(path string) int { return c.pos.line(path) }

func splitKey(k string) []string {
	var parts []string
	for _, part := range strings.Split(k, ".") {
		part = strings.TrimSpace(part)
		part = strings.Trim(part, `"'`)
		parts = append(parts, part)
	}
	return parts
}

func joinKey(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}
