package config

import (
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/streamd/streamd/pipeline/kafka"
)

// KafkaConn are the connection keys that [kafka] and each
// [kafka.clusters.NAME] have.
type KafkaConn struct {
	// TLS encrypts the connections ([kafka.tls]).
	TLS *KafkaTLS `toml:"tls"`
	// SASL authenticates them ([kafka.sasl]).
	SASL *KafkaSASL `toml:"sasl"`
	// Rack is this process's rack (availability zone): a source fetches
	// from the closest replica where the brokers allow it (KIP-392).
	Rack string `toml:"rack"`
	// ReplicationFactor of the topics streamd creates (0 = 1 on a
	// one-broker cluster, else the broker's default).
	ReplicationFactor int `toml:"replication_factor"`
	// TopicConfigs of the topics streamd creates, e.g.
	// {"retention.ms" = "604800000", "min.insync.replicas" = "2"}.
	TopicConfigs map[string]string `toml:"topic_configs"`
}

// KafkaCluster is a [kafka.clusters.NAME] table; for the default cluster,
// the [kafka] table's keys.
type KafkaCluster struct {
	Brokers  []string `toml:"brokers"`
	ClientID string   `toml:"client_id"`
	// Partitions of the topics streamd creates (default: [kafka]'s).
	Partitions int32 `toml:"partitions"`
	KafkaConn

	// Name is the cluster's name ("default" for [kafka]).
	Name string `toml:"-"`
	// At is the key path of its table, for errors ("kafka" or
	// "kafka.clusters.NAME").
	At string `toml:"-"`
}

// KafkaTLS is [kafka.tls]: TLS to the brokers.
type KafkaTLS struct {
	// Enabled turns TLS on; it defaults to true when the table is there.
	Enabled bool `toml:"enabled"`
	// CAFile is a PEM bundle of the CAs that sign the brokers'
	// certificates (default: the system roots).
	CAFile string `toml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and key, for
	// mutual TLS (read again when they change).
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// ServerName is the name checked against the brokers' certificates
	// (default: the host of each broker address).
	ServerName string `toml:"server_name"`
	// MinVersion is "1.2" (default) or "1.3".
	MinVersion string `toml:"min_version"`
	// InsecureSkipVerify accepts any broker certificate (tests only;
	// logged loudly at start).
	InsecureSkipVerify bool `toml:"insecure_skip_verify"`
}

// KafkaSASL is [kafka.sasl]: how the client authenticates.
type KafkaSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or
	// AWS_MSK_IAM.
	Mechanism string `toml:"mechanism"`
	// Username and Password, for PLAIN and SCRAM.
	Username string `toml:"username"`
	Password Secret `toml:"password"`
	// OAUTHBEARER: a static Token; or a TokenFile read again whenever it
	// changes; or the client-credentials flow against TokenURL with
	// ClientID, ClientSecret and Scopes. Extensions are SASL extensions
	// sent with the token (e.g. Confluent Cloud's logicalCluster).
	Token        Secret            `toml:"token"`
	TokenFile    string            `toml:"token_file"`
	TokenURL     string            `toml:"token_url"`
	ClientID     string            `toml:"client_id"`
	ClientSecret Secret            `toml:"client_secret"`
	Scopes       []string          `toml:"scopes"`
	Extensions   map[string]string `toml:"extensions"`
	// AWS_MSK_IAM: credentials come from the AWS SDK's default chain
	// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, the
	// shared config and credentials files with AWSProfile or
	// AWS_PROFILE, web identity, ECS and EC2 instance roles).
	AWSProfile string `toml:"aws_profile"`
}

// LogValue shows the SASL settings without a secret.
func (s KafkaSASL) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("mechanism", s.Mechanism)}
	if s.Username != "" {
		attrs = append(attrs, slog.String("username", s.Username))
	}
	if s.TokenURL != "" {
		attrs = append(attrs, slog.String("token_url", s.TokenURL), slog.String("client_id", s.ClientID))
	}
	return slog.GroupValue(attrs...)
}

// String is LogValue as text.
func (s KafkaSASL) String() string { return s.LogValue().String() }

// Mechanisms are the SASL mechanisms [kafka.sasl] takes.
var Mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"}

// DefaultCluster is the name of the [kafka] cluster in errors and logs.
const DefaultCluster = "default"

// Cluster returns the cluster a pipeline names ("" is [kafka]), or nil
// when there is none by that name.
func (c *Config) Cluster(name string) *KafkaCluster {
	if name == "" || name == DefaultCluster {
		return c.Kafka.def
	}
	return c.Kafka.Clusters[name]
}

// ClusterNames returns the names of the clusters, [kafka]'s first.
func (c *Config) ClusterNames() []string {
	names := []string{DefaultCluster}
	for n := range c.Kafka.Clusters {
		if n != DefaultCluster {
			names = append(names, n)
		}
	}
	sort.Strings(names[1:])
	return names
}

func (c *Config) kafkaDefaults() {
	k := &c.Kafka
	k.def = &KafkaCluster{Brokers: k.Brokers, ClientID: k.ClientID, Partitions: k.Partitions, KafkaConn: k.KafkaConn, Name: DefaultCluster, At: "kafka"}
	all := map[string]*KafkaCluster{"kafka": k.def}
	for name, cl := range k.Clusters {
		if cl == nil {
			cl = &KafkaCluster{}
			k.Clusters[name] = cl
		}
		at := "kafka.clusters." + name
		cl.Name, cl.At = name, at
		if !c.isSet(at + ".client_id") {
			cl.ClientID = k.ClientID
		}
		if !c.isSet(at + ".partitions") {
			cl.Partitions = k.Partitions
		}
		all[at] = cl
	}
	for at, cl := range all {
		if t := cl.TLS; t != nil {
			if !c.isSet(at + ".tls.enabled") {
				t.Enabled = true
			}
			t.CAFile, t.CertFile, t.KeyFile = c.Resolve(t.CAFile), c.Resolve(t.CertFile), c.Resolve(t.KeyFile)
		}
		if s := cl.SASL; s != nil {
			s.TokenFile = c.Resolve(s.TokenFile)
		}
	}
	// The [kafka] view shares TLS and SASL with k.KafkaConn (pointers), so
	// the resolved paths are the same.
}

// Ranges of the Kafka client keys.
var (
	rangeReplication    = intRange{lo: 1, hi: 32767, zero: "1 on a one-broker cluster, else the broker's default"}
	rangeFetchBytes     = intRange{lo: 1 << 10, hi: 100 << 20}
	rangeFetchMinBytes  = intRange{lo: 1, hi: 100 << 20}
	rangeFetchMaxWait   = durRange{lo: time.Millisecond, hi: 30 * time.Second}
	rangeProducerLinger = durRange{lo: 0, hi: time.Minute, zero: "send at once"}
)

// topicConfigRE is what a topic config's name looks like (retention.ms,
// cleanup.policy, ...).
var topicConfigRE = regexp.MustCompile(`^[a-z][a-z0-9]*(\.[a-z0-9]+)*$`)

func (c *Config) validateKafka(k *checker) {
	for name := range c.Kafka.Clusters {
		switch {
		case !nameRE.MatchString(name):
			k.bad("kafka.clusters."+name, "cluster name %q: use letters, digits, '.', '_' and '-'", name)
		case name == DefaultCluster:
			k.bad("kafka.clusters."+name, "%q is the name of [kafka] itself: pick another", name)
		}
	}
	for _, name := range c.ClusterNames() {
		cl := c.Cluster(name)
		at := cl.At
		if at != "kafka" {
			if len(cl.Brokers) == 0 {
				k.bad(at+".brokers", "required key is missing (the cluster's bootstrap addresses)")
			}
			k.nonEmpty(at+".client_id", cl.ClientID, "a client id", "[kafka]'s")
			k.int(at+".partitions", int64(cl.Partitions), rangePartitions)
		}
		for i, b := range cl.Brokers {
			if _, _, err := net.SplitHostPort(b); err != nil {
				k.bad(fmt.Sprintf("%s.brokers[%d]", at, i), "%q: want HOST:PORT", b)
			}
		}
		if c.isSet(at + ".replication_factor") {
			k.int(at+".replication_factor", int64(cl.ReplicationFactor), rangeReplication)
		}
		for name := range cl.TopicConfigs {
			if !topicConfigRE.MatchString(name) {
				k.bad(at+".topic_configs."+name, "%q is not a topic config name (e.g. \"retention.ms\", \"cleanup.policy\")", name)
			}
		}
		c.validateKafkaTLS(k, at, cl.TLS)
		c.validateKafkaSASL(k, at, cl)
	}
	if c.Kafka.Embedded != nil && (c.Kafka.TLS != nil || c.Kafka.SASL != nil) {
		k.bad("kafka.embedded", "the embedded broker has no TLS or SASL: remove [kafka.tls]/[kafka.sasl], or use kafka.brokers")
	}
}

func (c *Config) validateKafkaTLS(k *checker, at string, t *KafkaTLS) {
	if t == nil {
		return
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		k.bad(at+".tls", "set both cert_file and key_file (mutual TLS), or neither")
	}
	if !oneOf(t.MinVersion, "", "1.2", "1.3") {
		k.bad(at+".tls.min_version", "must be \"1.2\" or \"1.3\", not %q", t.MinVersion)
	}
}

func (c *Config) validateKafkaSASL(k *checker, at string, cl *KafkaCluster) {
	s := cl.SASL
	if s == nil {
		return
	}
	at += ".sasl"
	set := func(key string) bool { return c.isSet(at + "." + key) }
	only := func(mech string, keys ...string) {
		for _, key := range keys {
			if set(key) {
				k.bad(at+"."+key, "applies to mechanism %s, not %s", mech, s.Mechanism)
			}
		}
	}
	userKeys := []string{"username", "password"}
	oauthKeys := []string{"token", "token_file", "token_url", "client_id", "client_secret", "scopes", "extensions"}
	awsKeys := []string{"aws_profile"}
	switch s.Mechanism {
	case "":
		k.bad(at+".mechanism", "required key is missing (allowed: %s)", strings.Join(Mechanisms, ", "))
		return
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if s.Username == "" {
			k.bad(at+".username", "required for mechanism %s", s.Mechanism)
		}
		if s.Password.IsZero() {
			k.bad(at+".password", "required for mechanism %s (a value, \"${ENV}\" or \"${file:/path}\")", s.Mechanism)
		}
		only("OAUTHBEARER", oauthKeys...)
		only("AWS_MSK_IAM", awsKeys...)
	case "OAUTHBEARER":
		n := 0
		for _, key := range []string{"token", "token_file", "token_url"} {
			if set(key) {
				n++
			}
		}
		if n != 1 {
			k.bad(at, "mechanism OAUTHBEARER needs exactly one of token (static), token_file (read again when it changes) or token_url (the client-credentials flow)")
		}
		if s.TokenURL != "" {
			if !strings.HasPrefix(s.TokenURL, "https://") && !strings.HasPrefix(s.TokenURL, "http://") {
				k.bad(at+".token_url", "want an https:// URL")
			}
			if s.ClientID == "" {
				k.bad(at+".client_id", "required with token_url")
			}
			if s.ClientSecret.IsZero() {
				k.bad(at+".client_secret", "required with token_url")
			}
		} else {
			for _, key := range []string{"client_id", "client_secret", "scopes"} {
				if set(key) {
					k.bad(at+"."+key, "applies to the client-credentials flow (token_url) only")
				}
			}
		}
		only("PLAIN or SCRAM", userKeys...)
		only("AWS_MSK_IAM", awsKeys...)
	case "AWS_MSK_IAM":
		if cl.TLS == nil || !cl.TLS.Enabled {
			k.bad(at+".mechanism", "AWS_MSK_IAM needs TLS: add [%s.tls] (MSK's IAM listener is TLS only, port 9098)", cl.At)
		}
		only("PLAIN or SCRAM", userKeys...)
		only("OAUTHBEARER", oauthKeys...)
	default:
		k.bad(at+".mechanism", "unknown mechanism %q (allowed: %s)", s.Mechanism, strings.Join(Mechanisms, ", "))
	}
}

// validateKafkaClients checks a pipeline's cluster names and Kafka client
// keys.
func (c *Config) validateKafkaClients(k *checker, at string, p *Pipeline) {
	cluster := func(key, name string, used bool) {
		if name == "" {
			return
		}
		if !used {
			k.bad(at+"."+key, "applies to a kafka %s only", strings.Split(key, ".")[0])
			return
		}
		if c.Cluster(name) == nil {
			k.bad(at+"."+key, "no [kafka.clusters.%s] is configured (clusters: %s)", name, strings.Join(c.ClusterNames(), ", "))
		}
	}
	s, o, e := &p.Source, &p.Sink, &p.Errors
	cluster("source.cluster", s.Cluster, s.Type == "kafka")
	cluster("sink.cluster", o.Cluster, o.Type == "kafka")
	if e.DLQCluster != "" {
		cluster("errors.dlq_cluster", e.DLQCluster, true)
		if e.Policy != "dlq" {
			k.bad(at+".errors.dlq_cluster", "applies to policy = \"dlq\" only")
		}
	}
	if s.Type == "kafka" {
		if s.TopicsRegex != "" {
			if len(s.Topics) > 0 {
				k.bad(at+".source.topics_regex", "set topics or topics_regex, not both")
			}
			if _, err := regexp.Compile(s.TopicsRegex); err != nil {
				k.bad(at+".source.topics_regex", "%q is not a regular expression (RE2): %v", s.TopicsRegex, err)
			}
			if s.Fluid != nil {
				k.bad(at+".source.topics_regex", "a fluid consumer reads one topic: use topics")
			}
		}
		if f := s.Fluid; f != nil && !f.BridgeToken.IsZero() && f.Bridge == "" {
			k.bad(at+".source.fluid.bridge_token", "applies to another process's bridge (bridge = URL): this process's own bridge is called in process, without a token")
		}
		if !oneOf(s.IsolationLevel, "read_uncommitted", "read_committed") {
			k.bad(at+".source.isolation_level", "must be read_uncommitted or read_committed, not %q", s.IsolationLevel)
		}
		if !oneOf(s.GroupProtocol, "consumer", "classic") {
			k.bad(at+".source.group_protocol", "must be consumer (KIP-848 where the broker has it, else classic) or classic, not %q", s.GroupProtocol)
		}
		k.int(at+".source.fetch_max_bytes", int64(s.FetchMaxBytes), rangeFetchBytes)
		k.int(at+".source.fetch_max_partition_bytes", int64(s.FetchMaxPartitionBytes), rangeFetchBytes)
		k.int(at+".source.fetch_min_bytes", int64(s.FetchMinBytes), rangeFetchMinBytes)
		k.dur(at+".source.fetch_max_wait", s.FetchMaxWait.Duration, rangeFetchMaxWait)
	} else {
		for _, key := range []string{"topics_regex", "isolation_level", "group_protocol", "fetch_max_bytes", "fetch_max_partition_bytes", "fetch_min_bytes", "fetch_max_wait"} {
			if c.isSet(at + ".source." + key) {
				k.bad(at+".source."+key, "applies to a kafka source only")
			}
		}
	}
	if o.Type == "kafka" {
		if !oneOf(o.Acks, "all", "1", "0") {
			k.bad(at+".sink.acks", "must be \"all\", \"1\" or \"0\", not %q", o.Acks)
		}
		k.dur(at+".sink.linger", o.Linger.Duration, rangeProducerLinger)
	} else {
		for _, key := range []string{"acks", "linger"} {
			if c.isSet(at + ".sink." + key) {
				k.bad(at+".sink."+key, "applies to a kafka sink only")
			}
		}
	}
}

func (c *Config) kafkaClientDefaults(at string, p *Pipeline) {
	if s := &p.Source; s.Type == "kafka" {
		setDefault(c, at+"source.isolation_level", &s.IsolationLevel, "read_uncommitted")
		setDefault(c, at+"source.group_protocol", &s.GroupProtocol, kafka.DefaultGroupProtocol)
		setDefault(c, at+"source.fetch_max_bytes", &s.FetchMaxBytes, kafka.DefaultFetchMaxBytes)
		setDefault(c, at+"source.fetch_max_partition_bytes", &s.FetchMaxPartitionBytes, kafka.DefaultFetchMaxPartitionBytes)
		setDefault(c, at+"source.fetch_min_bytes", &s.FetchMinBytes, kafka.DefaultFetchMinBytes)
		setDefault(c, at+"source.fetch_max_wait", &s.FetchMaxWait.Duration, kafka.DefaultFetchMaxWait)
	}
	if o := &p.Sink; o.Type == "kafka" && !c.isSet(at+"sink.acks") {
		o.Acks = "all"
	}
}

// topicsOn is a set of topics of one cluster, for the loop checks.
type clusterTopic struct{ cluster, topic string }

// sourceCluster, sinkCluster and dlqCluster name the clusters a pipeline
// uses, "" when it does not use one there.
func (p *Pipeline) sourceCluster() string {
	return clusterName(p.Source.Type == "kafka", p.Source.Cluster)
}
func (p *Pipeline) sinkCluster() string { return clusterName(p.Sink.Type == "kafka", p.Sink.Cluster) }
func (p *Pipeline) dlqCluster() string {
	return clusterName(p.Errors.Policy == "dlq", p.Errors.DLQCluster)
}

func clusterName(used bool, name string) string {
	switch {
	case !used:
		return ""
	case name == "":
		return DefaultCluster
	}
	return name
}

// readsTopic reports whether the pipeline's kafka source reads topic on
// cluster.
func (p *Pipeline) readsTopic(cluster, topic string) bool {
	if p.sourceCluster() != cluster || cluster == "" {
		return false
	}
	if p.Source.TopicsRegex != "" {
		re, err := regexp.Compile(p.Source.TopicsRegex)
		return err == nil && re.MatchString(topic)
	}
	return slices.Contains(p.Source.Topics, topic)
}
