package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"time"
)

// SchemaRegistries is the [schema_registry] section: the default registry's
// keys, and named registries as sub-tables [schema_registry.NAME] with the
// same keys. A schema stage picks one with registry = "NAME" (default: the
// unnamed one).
type SchemaRegistries struct {
	SchemaRegistry
	// Named are the [schema_registry.NAME] registries.
	Named map[string]*SchemaRegistry `toml:"-"`

	problems []registryProblem // found while decoding, reported by validate
}

// SchemaRegistry is one Confluent-compatible Schema Registry.
type SchemaRegistry struct {
	// URL is the registry's base URL, e.g. http://127.0.0.1:8081 (for
	// Apicurio: http://HOST:PORT/apis/ccompat/v7). Credentials do not go in
	// the URL: use username/password or bearer_token.
	URL string `toml:"url"`
	// Username and Password are HTTP basic auth credentials.
	Username string `toml:"username"`
	Password string `toml:"password"`
	// BearerToken is sent as Authorization: Bearer (not with basic auth).
	BearerToken string `toml:"bearer_token"`
	// Timeout bounds one registry request (default 10s).
	Timeout Duration `toml:"timeout"`
	// TLS configures https:// URLs.
	TLS *RegistryTLS `toml:"tls"`
}

// RegistryTLS is a registry's TLS client configuration.
type RegistryTLS struct {
	// CAFile is a PEM bundle of the CAs to trust (default: the system roots).
	CAFile string `toml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and key (mutual TLS).
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// ServerName overrides the name checked against the server certificate.
	ServerName string `toml:"server_name"`
	// InsecureSkipVerify turns off server certificate verification (tests
	// only; logged loudly at start).
	InsecureSkipVerify bool `toml:"insecure_skip_verify"`
}

// LogValue shows a registry without its secrets.
func (r SchemaRegistry) LogValue() slog.Value {
	auth := "none"
	switch {
	case r.BearerToken != "":
		auth = "bearer"
	case r.Username != "":
		auth = "basic (user " + r.Username + ")"
	}
	return slog.GroupValue(slog.String("url", r.URL), slog.String("auth", auth), slog.Bool("tls", r.TLS != nil))
}

// String is LogValue as text: never a password or token.
func (r SchemaRegistry) String() string { return r.LogValue().String() }

type registryProblem struct{ path, msg string }

var registryKeys = map[string]bool{"url": true, "username": true, "password": true, "bearer_token": true, "timeout": true, "tls": true}

// UnmarshalTOML decodes [schema_registry]: its own keys, and every sub-table
// that is not one of them as a named registry.
func (s *SchemaRegistries) UnmarshalTOML(data any) error {
	m, ok := data.(map[string]any)
	if !ok {
		return fmt.Errorf("schema_registry must be a table")
	}
	s.decodeOne(&s.SchemaRegistry, m, "schema_registry", true)
	return nil
}

func (s *SchemaRegistries) problem(path, format string, args ...any) {
	s.problems = append(s.problems, registryProblem{path, fmt.Sprintf(format, args...)})
}

func (s *SchemaRegistries) decodeOne(r *SchemaRegistry, m map[string]any, at string, top bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	str := func(k string, v any) string {
		x, ok := v.(string)
		if !ok {
			s.problem(at+"."+k, "must be a string, not %T", v)
		}
		return x
	}
	for _, k := range keys {
		v := m[k]
		switch k {
		case "url":
			r.URL = str(k, v)
		case "username":
			r.Username = str(k, v)
		case "password":
			r.Password = str(k, v)
		case "bearer_token":
			r.BearerToken = str(k, v)
		case "timeout":
			if err := r.Timeout.UnmarshalText([]byte(str(k, v))); err != nil {
				s.problem(at+"."+k, "%v", err)
			}
		case "tls":
			t, ok := v.(map[string]any)
			if !ok {
				s.problem(at+".tls", "must be a table")
				continue
			}
			r.TLS = &RegistryTLS{}
			for tk, tv := range t {
				switch tk {
				case "ca_file":
					r.TLS.CAFile = str("tls."+tk, tv)
				case "cert_file":
					r.TLS.CertFile = str("tls."+tk, tv)
				case "key_file":
					r.TLS.KeyFile = str("tls."+tk, tv)
				case "server_name":
					r.TLS.ServerName = str("tls."+tk, tv)
				case "insecure_skip_verify":
					b, ok := tv.(bool)
					if !ok {
						s.problem(at+".tls."+tk, "must be true or false")
					}
					r.TLS.InsecureSkipVerify = b
				default:
					s.problem(at+".tls."+tk, "unknown key")
				}
			}
		default:
			sub, isTable := v.(map[string]any)
			if !top || !isTable {
				s.problem(at+"."+k, "unknown key%s", suggestFrom(k, registryKeys))
				continue
			}
			if !nameRE.MatchString(k) {
				s.problem(at+"."+k, "registry name %q: use letters, digits, '.', '_' and '-'", k)
				continue
			}
			if s.Named == nil {
				s.Named = map[string]*SchemaRegistry{}
			}
			n := &SchemaRegistry{}
			s.decodeOne(n, sub, at+"."+k, false)
			s.Named[k] = n
		}
	}
}

func suggestFrom(k string, known map[string]bool) string {
	best, bestD := "", 3
	for c := range known {
		d := editDistance(k, c)
		if transposed(k, c) {
			d = 1
		}
		if d > 0 && (d < bestD || d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// Registry returns the registry a schema stage names ("" is the default),
// or nil if there is none by that name.
func (c *Config) Registry(name string) *SchemaRegistry {
	s := c.SchemaRegistry
	if s == nil {
		return nil
	}
	if name == "" {
		if s.URL == "" {
			return nil
		}
		return &s.SchemaRegistry
	}
	return s.Named[name]
}

func (c *Config) schemaRegistryDefaults() {
	s := c.SchemaRegistry
	if s == nil {
		return
	}
	regs := map[string]*SchemaRegistry{"schema_registry": &s.SchemaRegistry}
	for name, r := range s.Named {
		regs["schema_registry."+name] = r
	}
	for at, r := range regs {
		if !c.isSet(at + ".timeout") {
			r.Timeout.Duration = 10 * time.Second
		}
		r.URL = strings.TrimRight(r.URL, "/")
		if t := r.TLS; t != nil {
			t.CAFile, t.CertFile, t.KeyFile = c.Resolve(t.CAFile), c.Resolve(t.CertFile), c.Resolve(t.KeyFile)
		}
	}
}

func (c *Config) validateSchemaRegistry(bad func(path, format string, args ...any)) {
	s := c.SchemaRegistry
	if s == nil {
		if f := c.Fluid; f != nil && f.Registry != "" {
			bad("fluid.registry", "no [schema_registry.%s] is configured", f.Registry)
		}
		return
	}
	if f := c.Fluid; f != nil && f.Registry != "" && c.Registry(f.Registry) == nil {
		bad("fluid.registry", "no [schema_registry.%s] is configured", f.Registry)
	}
	for _, p := range s.problems {
		bad(p.path, "%s", p.msg)
	}
	check := func(r *SchemaRegistry, at string, required bool) {
		if r.URL == "" {
			if required || r.Username != "" || r.BearerToken != "" || r.TLS != nil {
				bad(at+".url", "required key is missing")
			}
			return
		}
		u, err := url.Parse(r.URL)
		switch {
		case err != nil || u.Host == "":
			bad(at+".url", "want an http:// or https:// URL, not %q", redactURL(r.URL))
		case u.Scheme != "http" && u.Scheme != "https":
			bad(at+".url", "want an http:// or https:// URL, not a %s:// one", u.Scheme)
		case u.User != nil:
			bad(at+".url", "put credentials in username/password or bearer_token, not in the URL (it is logged)")
		}
		if r.BearerToken != "" && (r.Username != "" || r.Password != "") {
			bad(at, "set basic auth (username, password) or bearer_token, not both")
		}
		if r.Password != "" && r.Username == "" {
			bad(at+".username", "required with password")
		}
		if !rangeRegistry.ok(r.Timeout.Duration) {
			bad(at+".timeout", "%q is out of range (allowed: %s)", shortDur(r.Timeout.Duration), rangeRegistry.allowed())
		}
		if t := r.TLS; t != nil {
			if (t.CertFile == "") != (t.KeyFile == "") {
				bad(at+".tls", "set both cert_file and key_file, or neither")
			}
			if err == nil && u.Scheme == "http" {
				bad(at+".tls", "TLS is configured but the URL is http://")
			}
		}
	}
	check(&s.SchemaRegistry, "schema_registry", len(s.Named) == 0)
	for name, r := range s.Named {
		check(r, "schema_registry."+name, true)
	}
}

// redactURL drops a URL's user info so that an error never shows a password.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = url.User("REDACTED")
		return u.String()
	}
	if i := strings.Index(s, "@"); i >= 0 {
		return "REDACTED@" + s[i+1:]
	}
	return s
}

// validateSchemaStage checks a type = "schema" stage.
func (c *Config) validateSchemaStage(t *Stage, tat string, bad func(path, format string, args ...any)) {
	if !oneOf(t.Mode, "encode", "decode") {
		bad(tat+".mode", "must be encode or decode, not %q", t.Mode)
	}
	if c.Registry(t.Registry) == nil {
		switch {
		case t.Registry != "":
			bad(tat+".registry", "no [schema_registry.%s] is configured", t.Registry)
		default:
			bad(tat, "a schema stage needs [schema_registry] url = ... (or registry = \"NAME\")")
		}
	}
	if t.Path != "" || t.Plugin != "" || t.Codec != "" {
		bad(tat, "a schema stage is built in: path, plugin and codec do not apply")
	}
	if !oneOf(t.Part, "", "value", "key") {
		bad(tat+".part", "must be value or key, not %q", t.Part)
	}
	if !oneOf(t.Format, "", "avro", "protobuf", "json") {
		bad(tat+".format", "must be avro, protobuf or json, not %q", t.Format)
	}
	if t.Mode == "decode" {
		for k, set := range map[string]bool{"subject": t.Subject != "", "subject_strategy": t.SubjectStrategy != "",
			"schema_file": t.SchemaFile != "", "auto_register": t.AutoRegister, "version": t.Version != 0,
			"topic": t.Topic != "", "message": t.Message != "", "format": t.Format != ""} {
			if set {
				bad(tat+"."+k, "applies to mode = \"encode\" only (decode finds the writer's schema by the id in each record)")
			}
		}
		return
	}
	if !oneOf(t.SubjectStrategy, "", "topic-name", "record-name", "topic-record-name") {
		bad(tat+".subject_strategy", "must be topic-name, record-name or topic-record-name, not %q", t.SubjectStrategy)
	}
	if t.Subject != "" && t.SubjectStrategy != "" {
		bad(tat, "set subject or subject_strategy, not both")
	}
	if t.SchemaFile == "" {
		if t.AutoRegister {
			bad(tat+".auto_register", "needs schema_file (the schema to register)")
		}
		if t.SubjectStrategy == "record-name" || t.SubjectStrategy == "topic-record-name" {
			bad(tat+".schema_file", "required with subject_strategy = %q (the record name comes from the schema)", t.SubjectStrategy)
		}
	} else if t.Version != 0 {
		bad(tat+".version", "set schema_file or version, not both")
	}
	if t.Version < 0 {
		bad(tat+".version", "must be positive")
	}
}

// transposed reports whether a and b differ by two adjacent letters swapped.
func transposed(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i+1 < len(a); i++ {
		if a[i] != b[i] {
			return a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
		}
	}
	return false
}
