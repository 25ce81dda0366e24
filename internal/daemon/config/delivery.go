package config

import (
	"time"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
)

// The delivery guarantees of a pipeline (Pipeline.Delivery).
const (
	AtLeastOnce = "at-least-once"
	ExactlyOnce = "exactly-once"
)

// Transaction sizes the Kafka transactions of an exactly-once pipeline
// ([pipeline.transaction]): one ends when it holds MaxRecords records or
// Interval after its first record; its output is visible to read_committed
// readers only then.
type Transaction struct {
	// MaxRecords is the most records read in one transaction (default
	// pipeline.DefaultTxnRecords).
	MaxRecords int `toml:"max_records"`
	// Interval is how long a transaction runs after its first record
	// (default pipeline.DefaultTxnInterval): the latency exactly-once
	// adds, and how often it commits.
	Interval Duration `toml:"interval"`
	// Timeout is the Kafka transaction timeout: the broker aborts one
	// open longer (default kafka.DefaultTransactionTimeout); it is also
	// how long a crashed instance that does not come back holds
	// read_committed readers of its partitions.
	Timeout Duration `toml:"timeout"`
}

var (
	rangeTxnRecords  = intRange{lo: 1, hi: 1_000_000}
	rangeTxnInterval = durRange{lo: time.Millisecond, hi: 10 * time.Minute}
	// Kafka's transaction.max.timeout.ms is 15 minutes by default.
	rangeTxnTimeout = durRange{lo: time.Second, hi: 15 * time.Minute}
)

// deliveryDefaults fills in a pipeline's delivery keys; after
// kafkaClientDefaults, since exactly-once reads read_committed by default.
func (c *Config) deliveryDefaults(at string, p *Pipeline) {
	setDefault(c, at+"delivery", &p.Delivery, AtLeastOnce)
	if p.Delivery != ExactlyOnce {
		return
	}
	if p.Source.Type == "kafka" && !c.isSet(at+"source.isolation_level") {
		p.Source.IsolationLevel = "read_committed"
	}
	t := &p.Transaction
	setDefault(c, at+"transaction.max_records", &t.MaxRecords, pipeline.DefaultTxnRecords)
	setDefault(c, at+"transaction.interval", &t.Interval.Duration, pipeline.DefaultTxnInterval)
	setDefault(c, at+"transaction.timeout", &t.Timeout.Duration, kafka.DefaultTransactionTimeout)
}

// validateDelivery checks a pipeline's delivery keys: exactly-once needs a
// kafka source and a kafka sink on one cluster (the DLQ too).
func (c *Config) validateDelivery(k *checker, at string, p *Pipeline) {
	switch p.Delivery {
	case AtLeastOnce:
		for _, key := range []string{"max_records", "interval", "timeout"} {
			if c.isSet(at + ".transaction." + key) {
				k.bad(at+".transaction."+key, "applies to delivery = %q only", ExactlyOnce)
			}
		}
		return
	case ExactlyOnce:
	default:
		k.bad(at+".delivery", "must be %q or %q, not %q", AtLeastOnce, ExactlyOnce, p.Delivery)
		return
	}
	s, o := &p.Source, &p.Sink
	switch {
	case s.Type != "kafka":
		k.bad(at+".delivery", "exactly-once needs a kafka source, not %s: only Kafka commits the positions read in the same transaction as the output (use %q)", s.Type, AtLeastOnce)
	case s.Fluid != nil:
		k.bad(at+".delivery", "exactly-once does not take a fluid consumer as source (its positions are the fluid bridge's, not the group's): use %q", AtLeastOnce)
	}
	switch o.Type {
	case "kafka":
		if sc, oc := p.sourceCluster(), p.sinkCluster(); s.Type == "kafka" && sc != oc {
			k.bad(at+".sink.cluster", "exactly-once writes in the source's transactions, on its cluster %q, not %q: put the sink topic on the source's cluster, or use %q", sc, oc, AtLeastOnce)
		}
		if o.Acks != "all" {
			k.bad(at+".sink.acks", "exactly-once needs acks = \"all\" (transactions are idempotent writes), not %q", o.Acks)
		}
	case "journal":
		k.bad(at+".delivery", "the journal sink is effectively-once on its own (each partition's position is stored in the same store transaction as the events; see docs/delivery.md): leave delivery at %q", AtLeastOnce)
	default:
		k.bad(at+".delivery", "exactly-once needs a kafka sink: a %s sink cannot take part in a Kafka transaction, so a crash could write a record twice (write to a kafka topic, or use %q)", o.Type, AtLeastOnce)
	}
	if p.Errors.Policy == "dlq" && s.Type == "kafka" && p.dlqCluster() != p.sourceCluster() {
		k.bad(at+".errors.dlq_cluster", "exactly-once writes dead letters in the source's transactions, on its cluster %q, not %q: put the DLQ there, or use %q", p.sourceCluster(), p.dlqCluster(), AtLeastOnce)
	}
	t := &p.Transaction
	k.int(at+".transaction.max_records", int64(t.MaxRecords), rangeTxnRecords)
	k.dur(at+".transaction.interval", t.Interval.Duration, rangeTxnInterval)
	k.dur(at+".transaction.timeout", t.Timeout.Duration, rangeTxnTimeout)
	if rangeTxnInterval.ok(t.Interval.Duration) && rangeTxnTimeout.ok(t.Timeout.Duration) && t.Interval.Duration*2 > t.Timeout.Duration {
		k.bad(at+".transaction.interval", "%q is more than half the transaction timeout %q: a transaction also waits for its records to be written, and the broker aborts it at the timeout", shortDur(t.Interval.Duration), shortDur(t.Timeout.Duration))
	}
}
