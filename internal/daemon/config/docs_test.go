package config

import (
	"encoding"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/streamd/streamd/fluid"
)

// docKey is one key a config file may set: its path as the reference
// writes it (tables of tables named NAME, arrays of tables without an
// index), its Go type and how to reach its value from a *Config.
type docKey struct {
	path  string
	typ   reflect.Type
	index [][]int // field indexes, one list per struct crossed
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// configKeys lists every key Config accepts, by walking its toml tags:
// what the decoder accepts is what the reference must document.
func configKeys() []docKey {
	var keys []docKey
	var walk func(t reflect.Type, prefix string, index [][]int)
	walk = func(t reflect.Type, prefix string, index [][]int) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.String {
			t = t.Elem()
		}
		var fields func(t reflect.Type, at []int)
		fields = func(t reflect.Type, at []int) {
			for i := range t.NumField() {
				f := t.Field(i)
				idx := append(append([]int(nil), at...), i)
				if f.Anonymous {
					fields(f.Type, idx)
					continue
				}
				tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
				if tag == "" || tag == "-" || !f.IsExported() {
					continue
				}
				path := tag
				if prefix != "" {
					path = prefix + "." + tag
				}
				ft := f.Type
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				next := append(append([][]int(nil), index...), idx)
				switch {
				case reflect.PointerTo(ft).Implements(textUnmarshaler) && ft.Kind() != reflect.Struct || ft == reflect.TypeFor[Duration]() || ft == reflect.TypeFor[Secret]():
					keys = append(keys, docKey{path, ft, next})
				case ft.Kind() == reflect.Map && ft.Elem().Kind() != reflect.Interface && ft.Elem().Kind() != reflect.String:
					walk(ft.Elem(), path+".NAME", [][]int{{-1}}) // no default to read
				case ft.Kind() == reflect.Struct, ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
					walk(ft, path, next)
				default:
					keys = append(keys, docKey{path, ft, next})
				}
			}
		}
		fields(t, nil)
	}
	walk(reflect.TypeFor[Config](), "", nil)
	// [schema_registry.NAME] has the keys of [schema_registry].
	for _, k := range keys {
		if rest, ok := strings.CutPrefix(k.path, "schema_registry."); ok {
			keys = append(keys, docKey{path: "schema_registry.NAME." + rest, typ: k.typ})
		}
	}
	return keys
}

// fullConfig sets the tables whose keys' defaults the decoder fills in
// (their keys left out), so that each default can be read back.
const fullConfig = `
[admin]
listen = "127.0.0.1:9000"
[kafka.embedded]
[kafka.clusters.other]
brokers = ["o:1"]
[schema_registry]
url = "http://127.0.0.1:8081"
[journal]
store = "sqlite:j.db"
[fluid]
[[pipeline]]
name = "p"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
path = "x.wasm"
[pipeline.sink]
type = "kafka"
topic = "out"
[pipeline.errors]
policy = "dlq"
dlq_topic = "dlq"
[[pipeline.test]]
input = "in.jsonl"
[[pipeline]]
name = "g"
[pipeline.source]
type = "generate"
[pipeline.sink]
type = "drop"
`

// valueAt is k's value in c, following the first element of arrays of
// tables; ok is false where a table on the way is absent.
func valueAt(c *Config, k docKey) (reflect.Value, bool) {
	v := reflect.ValueOf(c).Elem()
	for _, idx := range k.index {
		if idx[0] < 0 {
			return v, false
		}
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice {
			if v.IsNil() || v.Kind() == reflect.Slice && v.Len() == 0 {
				return v, false
			}
			if v.Kind() == reflect.Slice {
				v = v.Index(0)
			} else {
				v = v.Elem()
			}
		}
		v = v.FieldByIndex(idx)
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	return v, true
}

// docValue writes v as the reference writes a default: TOML, durations in
// their shortest form.
func docValue(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case Duration:
		return quoteDur(x.Duration)
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	return fmt.Sprint(v.Interface())
}

// The same with the generate pipeline first (its source's defaults), and
// with an exactly-once pipeline first (the transaction's).
var (
	generateFirst = strings.Replace(fullConfig, "[[pipeline]]\nname = \"p\"", "[[pipeline]]\nname = \"g0\"\n[pipeline.source]\ntype = \"generate\"\n[pipeline.sink]\ntype = \"drop\"\n[[pipeline]]\nname = \"p\"", 1)
	exactlyOnce   = strings.Replace(fullConfig, "name = \"p\"", "name = \"p\"\ndelivery = \"exactly-once\"", 1)
)

// configFor names the config whose first pipeline shows a key's default.
var configFor = map[string]*string{
	"pipeline.source.rate":             &generateFirst,
	"pipeline.source.count":            &generateFirst,
	"pipeline.source.keys":             &generateFirst,
	"pipeline.errors.policy":           &generateFirst, // fullConfig's first pipeline sets dlq
	"pipeline.transaction.max_records": &exactlyOnce,
	"pipeline.transaction.interval":    &exactlyOnce,
	"pipeline.transaction.timeout":     &exactlyOnce,
}

// appliedLater are documented defaults this test cannot read back from a
// parsed config: the table is not in fullConfig (TLS needs files) or the
// decoder leaves the zero value, which the code that uses the key reads as
// the default (the comment says where). Only fluid.topic_suffix is compared
// with a constant; the others are stated here, so a change to one of them
// needs this list changed too.
var appliedLater = map[string]string{
	"admin.tls.min_version":                    `"1.2"`, // internal/x/tlsconf: "" is TLS 1.2
	"kafka.tls.enabled":                        "true",  // the table turns TLS on
	"kafka.tls.min_version":                    `"1.2"`, // internal/x/tlsconf
	"kafka.tls.insecure_skip_verify":           "false",
	"schema_registry.tls.insecure_skip_verify": "false",
	"pipeline.transform.part":                  `"value"`, // the schema stage: "" is the value
	"pipeline.transform.random":                "true",    // app: nil Random is crypto/rand
	"pipeline.sink.random":                     "true",
	"fluid.topic_suffix":                       strconv.Quote(fluid.DefaultTopicSuffix),
}

// docRow is one row of a table of docs/configuration.md.
type docRow struct {
	line              int
	typ, def, allowed string
}

// readConfigDoc parses docs/configuration.md: "## `[table]`" (or
// "## `[[table]]`", or "## Top level") headings, each followed by a table
// whose rows are "| `key` | type | default | range | meaning |".
func readConfigDoc(t *testing.T) map[string]docRow {
	t.Helper()
	b, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile("^## (?:Top level|`\\[\\[?([a-zA-Z_.]+)\\]\\]?`)$")
	rows := map[string]docRow{}
	prefix, inSection := "", false
	for i, line := range strings.Split(string(b), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			prefix, inSection = m[1], true
			continue
		}
		if strings.HasPrefix(line, "## ") {
			inSection = false
		}
		if !inSection || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) < 5 {
			t.Errorf("configuration.md:%d: want | key | type | default | range | meaning |, got %q", i+1, line)
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if prefix != "" {
			key = prefix + "." + key
		}
		if _, dup := rows[key]; dup {
			t.Errorf("configuration.md:%d: %s documented twice", i+1, key)
		}
		rows[key] = docRow{i + 1, strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])}
	}
	if len(rows) < 100 {
		t.Fatalf("configuration.md: only %d keys parsed", len(rows))
	}
	return rows
}

// docType is how the reference names a key's Go type.
func docType(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Duration]():
		return "duration"
	case reflect.TypeFor[Secret]():
		return "string"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		return "array of strings"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "table of strings"
		}
		return "table"
	}
	return t.String()
}

// literal is the default a cell states as a TOML value in backticks (the
// first backticked word, when it is a string, number or boolean), or "".
var literal = regexp.MustCompile("^`(\"[^\"<]*\"|-?[0-9]+(?:\\.[0-9]+)?|true|false)`")

// aliases: keys documented once for several tables.
var aliases = []struct{ from, to string }{
	{"kafka.clusters.NAME.tls.", "kafka.tls."},
	{"kafka.clusters.NAME.sasl.", "kafka.sasl."},
	{"schema_registry.NAME.", "schema_registry."},
}

// TestConfigurationDoc: docs/configuration.md documents every key the
// config decoder accepts, with its type, and no key it does not; every
// default it states as a literal is the one the code applies (so a
// Default* constant changed in code, or a default changed in the doc, fails
// here until both say the same).
func TestConfigurationDoc(t *testing.T) {
	doc := readConfigDoc(t)
	parsed := map[*string]*Config{}
	cfg := func(src *string) *Config {
		if parsed[src] == nil {
			parsed[src] = mustParse(t, *src)
		}
		return parsed[src]
	}
	full := fullConfig
	seen := map[string]bool{}
	for _, k := range configKeys() {
		path := k.path
		for _, a := range aliases {
			if rest, ok := strings.CutPrefix(path, a.from); ok {
				seen[strings.TrimSuffix(a.from, ".")] = true
				path = a.to + rest
			}
		}
		row, ok := doc[path]
		if !ok {
			t.Errorf("%s: accepted by the config, not in docs/configuration.md", k.path)
			continue
		}
		seen[path] = true
		if want := docType(k.typ); row.typ != want {
			t.Errorf("configuration.md:%d: %s is a %s, documented as %q", row.line, path, want, row.typ)
		}
		if path != k.path {
			continue // its default is checked on the aliased key
		}
		m := literal.FindStringSubmatch(row.def)
		if m == nil {
			continue // "none", "required", "`[plugins]`": no literal to check
		}
		want := m[1]
		src := configFor[path]
		if src == nil {
			src = &full
		}
		got := ""
		if v, ok := valueAt(cfg(src), k); ok && k.index != nil {
			got = docValue(v)
		}
		if later, ok := appliedLater[path]; ok && (got == "" || got == `""` || got == "false" || got == "0") {
			got = later
		}
		if got != want {
			t.Errorf("configuration.md:%d: %s defaults to %s in the code, documented as %s", row.line, path, got, want)
		}
	}
	for path, row := range doc {
		if !seen[path] {
			t.Errorf("configuration.md:%d: %s is documented, the config does not accept it", row.line, path)
		}
	}
}
