package config

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const srBase = `
[kafka]
brokers = ["b:1"]
[schema_registry]
url = "https://sr.example:8081/"
username = "svc"
password = "${SR_PASSWORD}"
[schema_registry.tls]
ca_file = "ca.pem"
[schema_registry.eu]
url = "http://sr-eu:8081"
bearer_token = "${SR_TOKEN}"
timeout = "3s"
[[pipeline]]
name = "p"
[pipeline.source]
type = "file"
path = "in.jsonl"
[[pipeline.transform]]
type = "schema"
mode = "decode"
[[pipeline.transform]]
type = "schema"
mode = "encode"
registry = "eu"
subject_strategy = "topic-record-name"
topic = "orders"
schema_file = "order.avsc"
auto_register = true
[pipeline.sink]
type = "drop"
`

func TestSchemaRegistryConfig(t *testing.T) {
	c, err := Parse("dir/c.toml", []byte(srBase), env(map[string]string{"SR_PASSWORD": "p4ss", "SR_TOKEN": "t0ken"}))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Registry("")
	if d == nil || d.URL != "https://sr.example:8081" || d.Password != "p4ss" || d.TLS.CAFile != "dir/ca.pem" || d.Timeout.Seconds() != 10 {
		t.Fatalf("default registry: %+v %+v", d, d.TLS)
	}
	eu := c.Registry("eu")
	if eu == nil || eu.BearerToken != "t0ken" || eu.Timeout.Seconds() != 3 {
		t.Fatalf("named registry (interpolated, defaults): %+v", eu)
	}
	if c.Registry("us") != nil {
		t.Fatal("an unknown name must give nil")
	}
	st := c.Pipelines[0].Transforms[1]
	if st.SchemaFile != "order.avsc" || !st.AutoRegister || st.Name != "schema-1" {
		t.Fatalf("stage: %+v", st)
	}
	// Secrets never in the text or log form.
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("registry", "default", *d, "eu", *eu)
	for _, s := range []string{b.String(), d.String(), eu.String(), fmt.Sprint(*d)} {
		if strings.Contains(s, "p4ss") || strings.Contains(s, "t0ken") {
			t.Fatalf("a secret is shown: %s", s)
		}
	}
	if !strings.Contains(b.String(), "sr-eu") {
		t.Fatalf("log line lacks the URL: %s", b.String())
	}
}

func TestSchemaRegistryConfigErrors(t *testing.T) {
	e := env(map[string]string{"SR_PASSWORD": "p4ss", "SR_TOKEN": "t0ken"})
	for _, tt := range []struct{ name, old, new, want string }{
		{"unknown key", `timeout = "3s"`, `timeout = "3s"` + "\n" + `ulr = "x"`, `c.toml:14: schema_registry.eu.ulr: unknown key (did you mean "url"?)`},
		{"unknown tls key", `ca_file = "ca.pem"`, `ca_fil = "ca.pem"`, `schema_registry.tls.ca_fil: unknown key`},
		{"bad duration", `timeout = "3s"`, `timeout = "3"`, `c.toml:13: schema_registry.eu.timeout: invalid duration`},
		{"wrong type", `username = "svc"`, `username = 7`, `schema_registry.username: must be a string`},
		{"url userinfo", `url = "http://sr-eu:8081"`, `url = "http://u:secret@sr-eu:8081"`, `schema_registry.eu.url: put credentials in username/password`},
		{"url scheme", `url = "http://sr-eu:8081"`, `url = "ftp://sr-eu"`, `schema_registry.eu.url: want an http:// or https:// URL, not a ftp:// one`},
		{"both auths", `bearer_token = "${SR_TOKEN}"`, `bearer_token = "x"` + "\n" + `username = "u"`, `schema_registry.eu: set basic auth (username, password) or bearer_token, not both`},
		{"tls on http", `url = "https://sr.example:8081/"`, `url = "http://sr.example:8081/"`, `schema_registry.tls: TLS is configured but the URL is http://`},
		{"cert without key", `ca_file = "ca.pem"`, `cert_file = "c.pem"`, `schema_registry.tls: set both cert_file and key_file`},
		{"unknown registry", `registry = "eu"`, `registry = "us"`, `c.toml:25: pipeline[0].transform[1].registry: no [schema_registry.us] is configured`},
		{"bad mode", `mode = "decode"`, `mode = "decod"`, `pipeline[0].transform[0].mode: must be encode or decode`},
		{"bad strategy", `subject_strategy = "topic-record-name"`, `subject_strategy = "topic"`, `subject_strategy: must be topic-name, record-name or topic-record-name`},
		{"encode key on decode", `mode = "decode"`, `mode = "decode"` + "\n" + `subject = "x"`, `pipeline[0].transform[0].subject: applies to mode = "encode" only`},
		{"auto register without file", `schema_file = "order.avsc"`, `version = 2`, `auto_register: needs schema_file`},
		{"record-name needs a schema", `schema_file = "order.avsc"` + "\n" + `auto_register = true`, ``, `schema_file: required with subject_strategy = "topic-record-name"`},
		{"bad part", `mode = "decode"`, `mode = "decode"` + "\n" + `part = "both"`, `part: must be value or key, not "both"`},
		{"bad registry name", `[schema_registry.eu]`, `[schema_registry."e u"]`, `registry name "e u"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(srBase, tt.old, tt.new, 1)
			if src == srBase {
				t.Fatal("edit did not apply")
			}
			_, err := Parse("c.toml", []byte(src), e)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v\nwant it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "p4ss") {
				t.Fatalf("error shows a secret: %v", err)
			}
		})
	}
	// A schema stage without any registry.
	src := strings.Replace(srBase, `registry = "eu"`+"\n", "", 1)
	src = src[:strings.Index(src, "[schema_registry]")] + src[strings.Index(src, "[[pipeline]]"):]
	if _, err := Parse("c.toml", []byte(src), e); err == nil || !strings.Contains(err.Error(), `a schema stage needs [schema_registry] url = ...`) {
		t.Fatalf("no registry: %v", err)
	}
}

func TestFluidRegistryConfig(t *testing.T) {
	src := srBase + "[fluid]\nregistry = \"eu\"\n"
	c, err := Parse("c.toml", []byte(src), env(map[string]string{"SR_PASSWORD": "p", "SR_TOKEN": "t"}))
	if err != nil || c.Fluid.Registry != "eu" {
		t.Fatalf("%v", err)
	}
	src = strings.Replace(src, `registry = "eu"`+"\n[pipeline.sink]", "[pipeline.sink]", 1)
	_, err = Parse("c.toml", []byte(strings.Replace(src, "[fluid]\nregistry = \"eu\"", "[fluid]\nregistry = \"us\"", 1)), env(map[string]string{"SR_PASSWORD": "p", "SR_TOKEN": "t"}))
	if err == nil || !strings.Contains(err.Error(), "fluid.registry: no [schema_registry.us] is configured") {
		t.Fatalf("unknown fluid registry: %v", err)
	}
}
