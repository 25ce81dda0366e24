package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Error is one configuration error at a place in the file.
type Error struct {
	File string
	Line int // 0 when unknown
	Col  int // 0 when unknown
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
		if e.Col > 0 {
			b.WriteString(":" + strconv.Itoa(e.Col))
		}
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads, decodes, interpolates, defaults and validates the file at path.
// The error, if any, joins one *Error per problem found.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b, os.LookupEnv)
}

var lineRE = regexp.MustCompile(`^toml: line (\d+)(?: \(last key "([^"]*)"\))?: (.*)$`)

// LoadForTest is Load for `streamd test`, which runs pipelines without a
// broker: kafka.brokers (or [kafka.embedded]) may be left out. Everything
// else is checked as Load does.
func LoadForTest(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, b, os.LookupEnv, true)
}

// Parse is Load on bytes already read; name is used in errors and to
// resolve relative paths; lookup resolves ${ENV} references.
func Parse(name string, src []byte, lookup func(string) (string, bool)) (*Config, error) {
	return parse(name, src, lookup, false)
}

// parse is Parse; noBrokers lets kafka.brokers be left out.
func parse(name string, src []byte, lookup func(string) (string, bool), noBrokers bool) (*Config, error) {
	// The parser's time grows with the square of the nesting depth: bound
	// the depth first.
	if _, line := scanDepth(string(src), MaxDepth); line > 0 {
		return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf(
			"nested more than %d levels deep (allowed: at most %d levels of tables, arrays and dotted keys)", MaxDepth, MaxDepth)}
	}
	c := &Config{File: name, noBrokers: noBrokers}
	md, err := toml.Decode(string(src), c)
	if err != nil {
		return nil, decodeError(name, err)
	}
	// The same file as plain tables says which keys it sets: an explicit
	// value is checked, an absent key gets its default.
	if _, err := toml.Decode(string(src), &c.raw); err != nil {
		return nil, decodeError(name, err)
	}
	c.pos = indexPositions(string(src))
	var errs []error
	more := 0
	seen := map[string]int{} // undecoded path -> times seen, for nth
	for _, k := range md.Undecoded() {
		if freeForm(k) {
			continue // inside a plugin's config table: the plugin's keys
		}
		if len(errs) == MaxErrors {
			more++
			continue
		}
		path := k.String()
		msg := "unknown key" + suggest(path)
		path = c.pos.nth(path, seen[path])
		seen[k.String()]++
		errs = append(errs, &Error{File: name, Line: c.pos.line(path), Key: path, Msg: msg})
	}
	if len(errs) > 0 {
		return nil, joinErrors(name, errs, more)
	}
	if err := c.interpolate(lookup); err != nil {
		return nil, err
	}
	c.setDefaults()
	if err := c.validate(); err != nil {
		return nil, c.RedactError(err)
	}
	return c, nil
}

// decodeError is the decoder's error as an *Error at its line.
func decodeError(name string, err error) error {
	// The decoder's "out of range for uint32" names the Go type: name the
	// key's range instead.
	allowed := func(key, msg string) string {
		if r, ok := typeRanges[key[strings.LastIndex(key, ".")+1:]]; ok && strings.Contains(msg, "out of range for") {
			msg = msg[:strings.Index(msg, "out of range for")] + "out of range (allowed: " + r.allowed() + ")"
		}
		return msg
	}
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &Error{File: name, Line: pe.Position.Line, Col: pe.Position.Col, Key: pe.LastKey, Msg: allowed(pe.LastKey, pe.Message)}
	}
	if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
		ln, _ := strconv.Atoi(m[1])
		return &Error{File: name, Line: ln, Key: m[2], Msg: allowed(m[2], m[3])}
	}
	return &Error{File: name, Msg: err.Error()}
}

// isSet reports whether the file sets the key at path (with array indices,
// e.g. "pipeline[0].batch.max_records"), in any of TOML's ways of writing it.
func (c *Config) isSet(path string) bool {
	var cur any = c.raw
	for _, part := range strings.Split(path, ".") {
		name, idx := part, -1
		if j := strings.IndexByte(part, '['); j >= 0 && strings.HasSuffix(part, "]") {
			name = part[:j]
			idx, _ = strconv.Atoi(part[j+1 : len(part)-1])
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		v, ok := m[name]
		if !ok {
			// The decoder matches keys to fields case-insensitively too.
			for k, kv := range m {
				if strings.EqualFold(k, name) {
					v, ok = kv, true
					break
				}
			}
			if !ok {
				return false
			}
		}
		if idx >= 0 {
			switch a := v.(type) {
			case []map[string]any:
				if idx >= len(a) {
					return false
				}
				v = a[idx]
			case []any:
				if idx >= len(a) {
					return false
				}
				v = a[idx]
			default:
				return false
			}
		}
		cur = v
	}
	return true
}

var unmarshalerType = reflect.TypeFor[toml.Unmarshaler]()

// freeForm reports whether key k lies inside a value the config does not
// describe key by key: a map (a plugin's config table, dirs) or a type
// that decodes itself. The decoder leaves the keys of nested tables there
// undecoded, but they are not unknown.
func freeForm(k toml.Key) bool {
	t := reflect.TypeFor[Config]()
	for _, part := range k {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map:
			// A map of tables ([kafka.clusters.NAME]) is described key by
			// key below its names; any other map is free.
			e := t.Elem()
			for e.Kind() == reflect.Pointer {
				e = e.Elem()
			}
			if e.Kind() != reflect.Struct || e == secretType {
				return true
			}
			t = e // part is the table's name
			continue
		case reflect.Interface:
			return true
		case reflect.Struct:
			if reflect.PointerTo(t).Implements(unmarshalerType) {
				return true
			}
			f, ok := fieldByKey(t, part)
			if !ok {
				return false
			}
			t = f.Type
		default:
			return false
		}
	}
	return false
}

// fieldByKey finds the field of struct t (or of a struct it embeds) whose
// toml tag is key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if g, ok := fieldByKey(f.Type, key); ok {
				return g, true
			}
			continue
		}
		if tag := f.Tag.Get("toml"); tag != "" && tag != "-" && strings.EqualFold(tag, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// errorf returns an *Error at key path (with array indices, e.g. "pipeline[0].sink.topic").
func (c *Config) errorf(path, format string, args ...any) error {
	return &Error{File: c.File, Line: c.pos.line(path), Key: path, Msg: fmt.Sprintf(format, args...)}
}

// Resolve makes a path from the config file relative to the file's folder.
func (c *Config) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

var envRE = regexp.MustCompile(`\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{file:([^}]*)\}`)

// wholeFileRE is a value that is one ${file:PATH} reference.
var wholeFileRE = regexp.MustCompile(`^\$\{file:([^}]+)\}$`)

var secretType = reflect.TypeFor[Secret]()

// interpolate replaces ${VAR} in every string value, naming the key of an
// unset variable, and ${file:PATH} with the file's content (without its
// trailing newline); a Secret that is one ${file:PATH} is read at each use
// instead (Secret.Value).
func (c *Config) interpolate(lookup func(string) (string, bool)) error {
	var errs []error
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		if v.Type() == secretType {
			if err := v.Addr().Interface().(*Secret).interpolate(c, lookup); err != nil {
				errs = append(errs, c.errorf(path, "%v", err))
			}
			return
		}
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem(), path)
			}
		case reflect.Struct:
			t := v.Type()
			for i := 0; i < t.NumField(); i++ {
				if t.Field(i).Anonymous {
					walk(v.Field(i), path)
					continue
				}
				tag := t.Field(i).Tag.Get("toml")
				if tag == "" || tag == "-" || !t.Field(i).IsExported() {
					continue
				}
				walk(v.Field(i), joinKey(path, tag))
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i), path+"["+strconv.Itoa(i)+"]")
			}
		case reflect.Map:
			for _, k := range v.MapKeys() {
				e := v.MapIndex(k)
				if e.Kind() == reflect.Pointer && !e.IsNil() && e.Elem().Kind() == reflect.Struct {
					walk(e.Elem(), joinKey(path, k.String())) // [kafka.clusters.NAME]
					continue
				}
				if e.Kind() == reflect.Interface && !e.IsNil() && e.Elem().Kind() == reflect.String {
					s, err := c.expand(e.Elem().String(), lookup)
					if err != nil {
						errs = append(errs, c.errorf(joinKey(path, k.String()), "%v", err))
						continue
					}
					v.SetMapIndex(k, reflect.ValueOf(s))
				} else if e.Kind() == reflect.String {
					s, err := c.expand(e.String(), lookup)
					if err != nil {
						errs = append(errs, c.errorf(joinKey(path, k.String()), "%v", err))
						continue
					}
					v.SetMapIndex(k, reflect.ValueOf(s).Convert(e.Type()))
				}
			}
		case reflect.String:
			s, err := c.expand(v.String(), lookup)
			if err != nil {
				errs = append(errs, c.errorf(path, "%v", err))
				return
			}
			v.SetString(s)
		}
	}
	walk(reflect.ValueOf(c).Elem(), "")
	if c.SchemaRegistry != nil {
		for name, r := range c.SchemaRegistry.Named {
			walk(reflect.ValueOf(r).Elem(), "schema_registry."+name)
		}
	}
	return errors.Join(errs...)
}

// expand is the package's expand of s with the config's paths, noting
// each value it put in for Redact.
func (c *Config) expand(s string, lookup func(string) (string, bool)) (string, error) {
	return expand(s, lookup, c.Resolve, c.noteInterpolated)
}

// expand interpolates s: ${VAR} from lookup, and ${file:PATH} read now
// with resolve making PATH absolute (nil: ${file:} is left as written);
// note, if not nil, is told each reference and the value put in for it.
// Errors name variables and files, never a value.
func expand(s string, lookup func(string) (string, bool), resolve func(string) string, note func(ref, value string)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var missing []string
	var fileErr error
	out := envRE.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$${" {
			return "${"
		}
		if strings.HasPrefix(m, "${file:") {
			if resolve == nil {
				return m
			}
			v, err := readSecretFile(resolve(m[len("${file:") : len(m)-1]))
			if err != nil && fileErr == nil {
				fileErr = err
			}
			if note != nil && err == nil {
				note(m, v)
			}
			return v
		}
		name := m[2 : len(m)-1]
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		} else if note != nil {
			note(m, v)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	if fileErr != nil {
		return "", fileErr
	}
	return out, nil
}

var knownKeys = func() []string {
	var keys []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeOf(Duration{}) {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			tag := t.Field(i).Tag.Get("toml")
			if t.Field(i).Anonymous {
				walk(t.Field(i).Type)
				continue
			}
			if tag == "" || tag == "-" {
				continue
			}
			keys = append(keys, tag)
			walk(t.Field(i).Type)
		}
	}
	walk(reflect.TypeOf(Config{}))
	return keys
}()

// suggest proposes a known key close to the last element of path.
func suggest(path string) string {
	last := path[strings.LastIndex(path, ".")+1:]
	best, bestD := "", 3
	for _, k := range knownKeys {
		if d := editDistance(last, k); d < bestD && d > 0 {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
