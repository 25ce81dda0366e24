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

// Parse is Load on bytes already read; name is used in errors and to
// resolve relative paths; lookup resolves ${ENV} references.
func Parse(name string, src []byte, lookup func(string) (string, bool)) (*Config, error) {
	c := &Config{File: name}
	md, err := toml.Decode(string(src), c)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: name, Line: pe.Position.Line, Col: pe.Position.Col, Key: pe.LastKey, Msg: pe.Message}
		}
		if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
			ln, _ := strconv.Atoi(m[1])
			return nil, &Error{File: name, Line: ln, Key: m[2], Msg: m[3]}
		}
		return nil, &Error{File: name, Msg: err.Error()}
	}
	c.pos = indexPositions(string(src))
	var errs []error
	for _, k := range md.Undecoded() {
		path := k.String()
		errs = append(errs, &Error{File: name, Line: c.pos.line(path), Key: path, Msg: "unknown key" + suggest(path)})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := c.interpolate(lookup); err != nil {
		return nil, err
	}
	c.setDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
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

var envRE = regexp.MustCompile(`\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// interpolate replaces ${VAR} in every string value, naming the key of an
// unset variable.
func (c *Config) interpolate(lookup func(string) (string, bool)) error {
	var errs []error
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
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
				if e.Kind() == reflect.Interface && !e.IsNil() && e.Elem().Kind() == reflect.String {
					s, err := expand(e.Elem().String(), lookup)
					if err != nil {
						errs = append(errs, c.errorf(joinKey(path, k.String()), "%v", err))
						continue
					}
					v.SetMapIndex(k, reflect.ValueOf(s))
				} else if e.Kind() == reflect.String {
					s, err := expand(e.String(), lookup)
					if err != nil {
						errs = append(errs, c.errorf(joinKey(path, k.String()), "%v", err))
						continue
					}
					v.SetMapIndex(k, reflect.ValueOf(s).Convert(e.Type()))
				}
			}
		case reflect.String:
			s, err := expand(v.String(), lookup)
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

func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var missing []string
	out := envRE.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$${" {
			return "${"
		}
		name := m[2 : len(m)-1]
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
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
