package config

import (
	"strings"
	"testing"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
)

const eosPipeline = `[kafka]
brokers = ["plain:9092"]
[kafka.clusters.other]
brokers = ["other:9092"]
[[pipeline]]
name = "eos"
delivery = "exactly-once"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "eos"
[pipeline.sink]
type = "kafka"
topic = "out"
[pipeline.errors]
policy = "dlq"
dlq_topic = "dead"
`

func TestDeliveryDefaults(t *testing.T) {
	c, err := Parse("c.toml", []byte(eosPipeline), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pipelines[0]
	if p.Delivery != ExactlyOnce || p.Source.IsolationLevel != "read_committed" || p.Transaction.MaxRecords != pipeline.DefaultTxnRecords ||
		p.Transaction.Interval.Duration != pipeline.DefaultTxnInterval || p.Transaction.Timeout.Duration != kafka.DefaultTransactionTimeout {
		t.Fatalf("exactly-once defaults: delivery %q, isolation %q, transaction %+v", p.Delivery, p.Source.IsolationLevel, p.Transaction)
	}
	alo := strings.Replace(eosPipeline, "delivery = \"exactly-once\"\n", "", 1)
	if c, err = Parse("c.toml", []byte(alo), env(nil)); err != nil {
		t.Fatal(err)
	}
	if p := c.Pipelines[0]; p.Delivery != AtLeastOnce || p.Source.IsolationLevel != "read_uncommitted" {
		t.Fatalf("default delivery %q, isolation %q", p.Delivery, p.Source.IsolationLevel)
	}
	// read_uncommitted may be asked for (an upstream that is not
	// transactional reads the same either way).
	ru := strings.Replace(eosPipeline, "group = \"eos\"\n", "group = \"eos\"\nisolation_level = \"read_uncommitted\"\n", 1)
	if c, err = Parse("c.toml", []byte(ru), env(nil)); err != nil || c.Pipelines[0].Source.IsolationLevel != "read_uncommitted" {
		t.Fatalf("isolation_level read_uncommitted under exactly-once: %v", err)
	}
}

func TestDeliveryRefused(t *testing.T) {
	sink := func(lines string) string {
		return strings.Replace(eosPipeline, "type = \"kafka\"\ntopic = \"out\"\n", lines, 1)
	}
	for _, tc := range []struct{ name, src, at, want string }{
		{"unknown delivery", strings.Replace(eosPipeline, `"exactly-once"`, `"exactly_once"`, 1), "delivery",
			`pipeline[0].delivery: must be "at-least-once" or "exactly-once", not "exactly_once"`},
		{"file sink", sink("type = \"file\"\npath = \"out.jsonl\"\n"), "delivery",
			`pipeline[0].delivery: exactly-once needs a kafka sink: a file sink cannot take part in a Kafka transaction`},
		{"stdout sink", sink("type = \"stdout\"\n"), "delivery",
			`pipeline[0].delivery: exactly-once needs a kafka sink: a stdout sink cannot take part`},
		{"plugin sink", sink("type = \"wasm\"\nplugin = \"s3\"\n"), "delivery",
			`pipeline[0].delivery: exactly-once needs a kafka sink: a wasm sink cannot take part`},
		{"sink on another cluster", sink("type = \"kafka\"\ntopic = \"out\"\ncluster = \"other\"\n"), `cluster = "other"`,
			`pipeline[0].sink.cluster: exactly-once writes in the source's transactions, on its cluster "default", not "other"`},
		{"DLQ on another cluster", strings.Replace(eosPipeline, "dlq_topic = \"dead\"\n", "dlq_topic = \"dead\"\ndlq_cluster = \"other\"\n", 1), "dlq_cluster",
			`pipeline[0].errors.dlq_cluster: exactly-once writes dead letters in the source's transactions, on its cluster "default", not "other"`},
		{"acks 1", sink("type = \"kafka\"\ntopic = \"out\"\nacks = \"1\"\n"), "acks",
			`pipeline[0].sink.acks: exactly-once needs acks = "all"`},
		{"file source", strings.Replace(eosPipeline, "type = \"kafka\"\ntopics = [\"in\"]\ngroup = \"eos\"\n", "type = \"file\"\npath = \"in.jsonl\"\n", 1), "delivery",
			`pipeline[0].delivery: exactly-once needs a kafka source, not file`},
		{"transaction keys without exactly-once", strings.Replace(eosPipeline, "delivery = \"exactly-once\"\n", "[pipeline.transaction]\ninterval = \"1s\"\n", 1), "interval",
			`pipeline[0].transaction.interval: applies to delivery = "exactly-once" only`},
		{"interval too long for the timeout", eosPipeline + "[pipeline.transaction]\ninterval = \"6s\"\n", "interval",
			`pipeline[0].transaction.interval: "6s" is more than half the transaction timeout "10s"`},
		{"timeout out of range", eosPipeline + "[pipeline.transaction]\ntimeout = \"1h\"\n", "timeout",
			`pipeline[0].transaction.timeout: "1h" is out of range`},
		{"max_records 0", eosPipeline + "[pipeline.transaction]\nmax_records = 0\n", "max_records",
			`pipeline[0].transaction.max_records: 0 is out of range`},
	} {
		refused(t, tc.name, tc.src, tc.at, tc.want)
	}
}
