package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/pipeline/kafka"
)

// refused parses src and checks that its first error is want at the
// line of at.
func refused(t *testing.T, name, src, at, want string) {
	t.Helper()
	_, err := Parse("c.toml", []byte(src), env(nil))
	if err == nil {
		t.Errorf("%s: accepted:\n%s", name, src)
		return
	}
	got := colRE.ReplaceAllString(err.Error(), "$1: ")
	w := "c.toml:" + strconv.Itoa(lineOf(t, src, at)) + ": " + want
	if !strings.Contains(got, w) {
		t.Errorf("%s:\n got %s\nwant %s", name, got, w)
	}
}

const twoClusters = `[kafka]
brokers = ["plain:9092"]
client_id = "app"
[kafka.clusters.secure]
brokers = ["secure:9093"]
replication_factor = 3
[kafka.clusters.secure.tls]
ca_file = "ca.pem"
[kafka.clusters.secure.sasl]
mechanism = "SCRAM-SHA-512"
username = "alice"
password = "s3cret"
[kafka.clusters.secure.topic_configs]
"retention.ms" = "604800000"
[[pipeline]]
name = "mirror"
[pipeline.source]
type = "kafka"
topics = ["orders"]
group = "mirror"
[pipeline.sink]
type = "kafka"
cluster = "secure"
topic = "orders"
`

func TestKafkaClusters(t *testing.T) {
	c, err := Parse("dir/c.toml", []byte(twoClusters), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	def, sec := c.Cluster(""), c.Cluster("secure")
	if def == nil || sec == nil || c.Cluster("nope") != nil {
		t.Fatalf("clusters: %v %v", def, sec)
	}
	if def.Name != "default" || def.Brokers[0] != "plain:9092" || def.TLS != nil || def.SASL != nil {
		t.Errorf("default cluster: %+v", def)
	}
	if sec.Brokers[0] != "secure:9093" || sec.ClientID != "app" || sec.Partitions != kafka.DefaultPartitions || sec.ReplicationFactor != 3 ||
		!sec.TLS.Enabled || sec.TLS.CAFile != filepath.Join("dir", "ca.pem") || sec.SASL.Username != "alice" || sec.TopicConfigs["retention.ms"] != "604800000" {
		t.Errorf("secure cluster: %+v %+v %+v", sec, sec.TLS, sec.SASL)
	}
	if v, _ := sec.SASL.Password.Value(); v != "s3cret" {
		t.Errorf("password %q", v)
	}
	p := c.Pipelines[0]
	if p.Source.IsolationLevel != "read_uncommitted" || p.Source.GroupProtocol != kafka.DefaultGroupProtocol ||
		p.Source.FetchMaxBytes != kafka.DefaultFetchMaxBytes || p.Source.FetchMaxPartitionBytes != kafka.DefaultFetchMaxPartitionBytes ||
		p.Source.FetchMinBytes != kafka.DefaultFetchMinBytes || p.Source.FetchMaxWait.Duration != kafka.DefaultFetchMaxWait || p.Sink.Acks != "all" || p.Sink.Linger.Duration != 0 {
		t.Errorf("client defaults: %+v %+v", p.Source, p.Sink)
	}
	// Mirroring "orders" between clusters is no loop; on one cluster it is.
	refused(t, "same topic, same cluster", strings.Replace(twoClusters, "cluster = \"secure\"\n", "", 1), `topic = "orders"`,
		`pipeline[0].sink.topic: "orders" is also this pipeline's source topic`)
	// A loop through two clusters is one.
	back := twoClusters + `[[pipeline]]
name = "back"
[pipeline.source]
type = "kafka"
cluster = "secure"
topics = ["orders"]
group = "back"
[pipeline.sink]
type = "kafka"
topic = "orders"
`
	_, err = Parse("c.toml", []byte(back), env(nil))
	if err == nil || !strings.Contains(err.Error(), `closes a loop of topics (orders -> mirror -> secure:orders -> back -> orders)`) {
		t.Errorf("a loop across clusters: %v", err)
	}
	// Regex sources.
	re := strings.Replace(twoClusters, `topics = ["orders"]`, `topics_regex = "^ord.*$"`, 1)
	if _, err := Parse("c.toml", []byte(re), env(nil)); err != nil {
		t.Errorf("topics_regex: %v", err)
	}
	refused(t, "regex matching the sink topic", strings.Replace(re, "cluster = \"secure\"\n", "", 1), `topic = "orders"`,
		`pipeline[0].sink.topic: "orders" is also this pipeline's source topic`)
}

func TestKafkaConfigRefused(t *testing.T) {
	sasl := func(lines string) string {
		return strings.Replace(twoClusters, "mechanism = \"SCRAM-SHA-512\"\nusername = \"alice\"\npassword = \"s3cret\"\n", lines, 1)
	}
	for _, tc := range []struct{ name, src, at, want string }{
		{"unknown key in a named cluster", strings.Replace(twoClusters, "replication_factor = 3", "replication_facter = 3", 1), "replication_facter",
			`kafka.clusters.secure.replication_facter: unknown key (did you mean "replication_factor"?)`},
		{"unknown cluster", strings.Replace(twoClusters, `cluster = "secure"`, `cluster = "secured"`, 1), `cluster = "secured"`,
			`pipeline[0].sink.cluster: no [kafka.clusters.secured] is configured (clusters: default, secure)`},
		{"a cluster named default", strings.Replace(twoClusters, "[kafka.clusters.secure]\n", "[kafka.clusters.default]\nbrokers = [\"x:1\"]\n[kafka.clusters.secure]\n", 1), "[kafka.clusters.default]",
			`kafka.clusters.default: "default" is the name of [kafka] itself`},
		{"a cluster without brokers", strings.Replace(twoClusters, "brokers = [\"secure:9093\"]\n", "", 1), "[kafka.clusters.secure]",
			`kafka.clusters.secure.brokers: required key is missing`},
		{"a broker without a port", strings.Replace(twoClusters, `"secure:9093"`, `"secure"`, 1), `"secure"`,
			`kafka.clusters.secure.brokers[0]: "secure": want HOST:PORT`},
		{"unknown mechanism", sasl("mechanism = \"SCRAM-SHA-1\"\n"), "SCRAM-SHA-1",
			`kafka.clusters.secure.sasl.mechanism: unknown mechanism "SCRAM-SHA-1" (allowed: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM)`},
		{"no password", sasl("mechanism = \"PLAIN\"\nusername = \"u\"\n"), "[kafka.clusters.secure.sasl]",
			`kafka.clusters.secure.sasl.password: required for mechanism PLAIN`},
		{"token and token_url", sasl("mechanism = \"OAUTHBEARER\"\ntoken = \"t\"\ntoken_url = \"https://idp/token\"\nclient_id = \"c\"\nclient_secret = \"s\"\n"), "[kafka.clusters.secure.sasl]",
			`kafka.clusters.secure.sasl: mechanism OAUTHBEARER needs exactly one of token`},
		{"client_secret without token_url", sasl("mechanism = \"OAUTHBEARER\"\ntoken_file = \"t\"\nclient_secret = \"s\"\n"), "client_secret",
			`kafka.clusters.secure.sasl.client_secret: applies to the client-credentials flow (token_url) only`},
		{"password with OAUTHBEARER", sasl("mechanism = \"OAUTHBEARER\"\ntoken = \"t\"\npassword = \"p\"\n"), "password",
			`kafka.clusters.secure.sasl.password: applies to mechanism PLAIN or SCRAM, not OAUTHBEARER`},
		{"MSK IAM without TLS", strings.Replace(sasl("mechanism = \"AWS_MSK_IAM\"\n"), "[kafka.clusters.secure.tls]\nca_file = \"ca.pem\"\n", "", 1), "AWS_MSK_IAM",
			`kafka.clusters.secure.sasl.mechanism: AWS_MSK_IAM needs TLS`},
		{"isolation level", strings.Replace(twoClusters, "group = \"mirror\"\n", "group = \"mirror\"\nisolation_level = \"committed\"\n", 1), "isolation_level",
			`pipeline[0].source.isolation_level: must be read_uncommitted or read_committed, not "committed"`},
		{"group protocol", strings.Replace(twoClusters, "group = \"mirror\"\n", "group = \"mirror\"\ngroup_protocol = \"eager\"\n", 1), "group_protocol",
			`pipeline[0].source.group_protocol: must be consumer`},
		{"fetch_max_bytes", strings.Replace(twoClusters, "group = \"mirror\"\n", "group = \"mirror\"\nfetch_max_bytes = 10\n", 1), "fetch_max_bytes",
			`pipeline[0].source.fetch_max_bytes: 10 is out of range (allowed: 1024 to 104857600)`},
		{"acks", strings.Replace(twoClusters, "topic = \"orders\"\n", "topic = \"orders\"\nacks = \"-1\"\n", 1), "acks",
			`pipeline[0].sink.acks: must be "all", "1" or "0", not "-1"`},
		{"replication factor", strings.Replace(twoClusters, "replication_factor = 3", "replication_factor = -1", 1), "replication_factor",
			`kafka.clusters.secure.replication_factor: -1 is out of range`},
		{"topic config name", strings.Replace(twoClusters, `"retention.ms"`, `"Retention MS"`, 1), "Retention MS",
			`kafka.clusters.secure.topic_configs.Retention MS: "Retention MS" is not a topic config name`},
		{"regex and topics", strings.Replace(twoClusters, "group = \"mirror\"\n", "group = \"mirror\"\ntopics_regex = \"x\"\n", 1), "topics_regex",
			`pipeline[0].source.topics_regex: set topics or topics_regex, not both`},
		{"bad regex", strings.Replace(twoClusters, `topics = ["orders"]`, `topics_regex = "(("`, 1), "topics_regex",
			`pipeline[0].source.topics_regex: "((" is not a regular expression`},
		{"tls without key", strings.Replace(twoClusters, "ca_file = \"ca.pem\"\n", "ca_file = \"ca.pem\"\ncert_file = \"c.pem\"\n", 1), "[kafka.clusters.secure.tls]",
			`kafka.clusters.secure.tls: set both cert_file and key_file`},
	} {
		refused(t, tc.name, tc.src, tc.at, tc.want)
	}
}

// TestSecrets: a secret may come from ${ENV} or ${file:PATH}; a whole
// ${file:PATH} value is read at each use (rotation), ${file:PATH} in a
// longer string once at load; neither value appears in an error, in
// fmt's output of the config, in JSON or in a log line.
func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "kafka-password")
	if err := os.WriteFile(pwFile, []byte("first-Pa55word\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pg-password"), []byte("pg-Pa55word\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`[kafka]
brokers = ["b:1"]
[kafka.tls]
[kafka.sasl]
mechanism = "SCRAM-SHA-256"
username = "alice"
password = "${file:%s}"
[journal]
store = "postgres://streamd:${file:pg-password}@db/streamd"
[[pipeline]]
name = "p"
[pipeline.source]
type = "generate"
[pipeline.sink]
type = "drop"
[[pipeline.transform]]
type = "wasm"
path = "x.wasm"
[pipeline.transform.config]
token = "${TOKEN}"
`, pwFile)
	c, err := Parse(filepath.Join(dir, "c.toml"), []byte(src), env(map[string]string{"TOKEN": "env-T0ken"}))
	if err != nil {
		t.Fatal(err)
	}
	pw := c.Kafka.SASL.Password
	if v, err := pw.Value(); err != nil || v != "first-Pa55word" {
		t.Fatalf("password %q %v", v, err)
	}
	if err := os.WriteFile(pwFile, []byte("rotated-Pa55word"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, _ := pw.Value(); v != "rotated-Pa55word" {
		t.Fatalf("after rotation: %q", v)
	}
	if c.Journal.Store != "postgres://streamd:pg-Pa55word@db/streamd" || c.Pipelines[0].Transforms[0].Config["token"] != "env-T0ken" {
		t.Fatalf("inline file / env: %q %v", c.Journal.Store, c.Pipelines[0].Transforms[0].Config)
	}
	// Nothing prints the Kafka password.
	js, _ := json.Marshal(c.Kafka)
	var logs strings.Builder
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "sasl", c.Kafka.SASL, "password", pw, "kafka", c.Kafka)
	for _, out := range []string{fmt.Sprintf("%v %+v %#v %s", c.Kafka, *c.Kafka.SASL, *c.Kafka.SASL, pw), string(js), logs.String()} {
		if strings.Contains(out, "Pa55word") {
			t.Errorf("a secret is printed: %s", out)
		}
	}
	if !strings.Contains(pw.String(), pwFile) {
		t.Errorf("a file secret should name its file: %s", pw)
	}
	// A missing secret file is an error at the key's line that names the
	// file.
	missing := strings.Replace(src, pwFile, filepath.Join(dir, "nope"), 1)
	_, err = Parse("c.toml", []byte(missing), env(map[string]string{"TOKEN": "x"}))
	if err == nil || !strings.Contains(err.Error(), "c.toml:7: kafka.sasl.password: secret file "+filepath.Join(dir, "nope")) {
		t.Errorf("missing file: %v", err)
	}
	// An empty one too, and its error has no content to show.
	if err := os.WriteFile(pwFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Parse("c.toml", []byte(src), env(map[string]string{"TOKEN": "x"}))
	if err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty file: %v", err)
	}
	_ = time.Second
}

// TestSecretsInNamedClusters: ${file:} and ${ENV} work in
// [kafka.clusters.NAME] as in [kafka] (they were left as written).
func TestSecretsInNamedClusters(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("named-Pa55\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(strings.Replace(twoClusters, `password = "s3cret"`, `password = "${file:`+pw+`}"`, 1), `brokers = ["secure:9093"]`, `brokers = ["${SECURE}"]`, 1)
	c, err := Parse("c.toml", []byte(src), env(map[string]string{"SECURE": "s:1"}))
	if err != nil {
		t.Fatal(err)
	}
	sec := c.Cluster("secure")
	if v, err := sec.SASL.Password.Value(); err != nil || v != "named-Pa55" || sec.Brokers[0] != "s:1" {
		t.Fatalf("password %q %v, brokers %v", v, err, sec.Brokers)
	}
}
