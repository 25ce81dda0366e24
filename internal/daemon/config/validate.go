package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/internal/daemon/defaults"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/codecs"
)

// setDefaults fills in the keys the file leaves out. A key the file sets
// keeps its value, zero included, for validate to check: an explicit value
// means what it says or is refused, never silently replaced.
func (c *Config) setDefaults() {
	unset := func(path string) bool { return !c.isSet(path) }
	setDefault(c, "data_dir", &c.DataDir, "data")
	c.DataDir = c.Resolve(c.DataDir)
	setDefault(c, "log.level", &c.Log.Level, "info")
	setDefault(c, "log.format", &c.Log.Format, "text")
	setDefault(c, "kafka.partitions", &c.Kafka.Partitions, kafka.DefaultPartitions)
	setDefault(c, "kafka.client_id", &c.Kafka.ClientID, "streamd")
	if e := c.Kafka.Embedded; e != nil {
		setDefault(c, "kafka.embedded.listen", &e.Listen, "127.0.0.1:9092")
		if unset("kafka.embedded.data_dir") {
			e.DataDir = filepath.Join(c.DataDir, "broker")
		} else {
			e.DataDir = c.Resolve(e.DataDir)
		}
		setDefault(c, "kafka.embedded.retention", &e.Retention.Duration, defaults.EmbeddedRetention)
		setDefault(c, "kafka.embedded.retention_bytes", &e.RetentionBytes, defaults.EmbeddedRetentionBytes)
		setDefault(c, "kafka.embedded.segment_bytes", &e.SegmentBytes, defaults.EmbeddedSegmentBytes)
		setDefault(c, "kafka.embedded.disk_budget_bytes", &e.DiskBudgetBytes, defaults.EmbeddedDiskBudget)
		setDefault(c, "kafka.embedded.retention_check_interval", &e.RetentionCheckInterval.Duration, defaults.EmbeddedRetentionCheck)
		if len(c.Kafka.Brokers) == 0 {
			c.Kafka.Brokers = []string{e.Listen}
		}
	}
	c.kafkaDefaults()
	if unset("plugins.cache_dir") {
		c.Plugins.CacheDir = filepath.Join(c.DataDir, "wasm-cache")
	} else {
		c.Plugins.CacheDir = c.Resolve(c.Plugins.CacheDir)
	}
	setDefault(c, "plugins.max_memory_pages", &c.Plugins.MaxMemoryPages, plugins.DefaultMaxMemoryPages)
	setDefault(c, "plugins.max_table_elements", &c.Plugins.MaxTableElements, plugins.DefaultMaxTableElements)
	setDefault(c, "plugins.max_module_bytes", &c.Plugins.MaxModuleBytes, plugins.DefaultMaxModuleBytes)
	setDefault(c, "plugins.compile_timeout", &c.Plugins.CompileTimeout.Duration, plugins.DefaultCompileTimeout)
	setDefault(c, "plugins.max_log_line_bytes", &c.Plugins.MaxLogLineBytes, plugins.DefaultMaxLogLineBytes)
	setDefault(c, "plugins.max_log_lines_per_record", &c.Plugins.MaxLogLinesPerRecord, plugins.DefaultMaxLogLinesPerRecord)
	setDefault(c, "plugins.max_log_bytes_per_record", &c.Plugins.MaxLogBytesPerRecord, plugins.DefaultMaxLogBytesPerRecord)
	if c.Plugins.Watch == nil {
		c.Plugins.Watch = &Duration{DefaultWatch}
	}
	setDefault(c, "plugins.timeout", &c.Plugins.Timeout.Duration, plugins.DefaultTimeout)
	setDefault(c, "plugins.load_timeout", &c.Plugins.LoadTimeout.Duration, DefaultLoadTimeout)
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		at := fmt.Sprintf("pipeline[%d].", i)
		setDefault(c, at+"max_in_flight", &p.MaxInFlight, pipeline.DefaultMaxInFlight)
		setDefault(c, at+"shutdown_timeout", &p.ShutdownTimeout.Duration, pipeline.DefaultShutdownTimeout)
		if p.CommitInterval == nil {
			p.CommitInterval = &Duration{pipeline.DefaultCommitInterval}
		}
		if p.StallTimeout == nil {
			p.StallTimeout = &Duration{pipeline.DefaultStallTimeout}
		}
		setDefault(c, at+"workers", &p.Workers, pipeline.DefaultWorkers)
		setDefault(c, at+"batch.max_records", &p.Batch.MaxRecords, pipeline.DefaultMaxRecords)
		setDefault(c, at+"batch.max_bytes", &p.Batch.MaxBytes, pipeline.DefaultMaxBytes)
		setDefault(c, at+"batch.linger", &p.Batch.Linger.Duration, pipeline.DefaultLinger)
		setDefault(c, at+"errors.policy", &p.Errors.Policy, "stop")
		setDefault(c, at+"errors.retry_initial", &p.Errors.RetryInitial.Duration, pipeline.DefaultRetryInitial)
		setDefault(c, at+"errors.retry_max", &p.Errors.RetryMax.Duration, max(pipeline.DefaultRetryMax, p.Errors.RetryInitial.Duration))
		c.kafkaClientDefaults(at, p)
		c.deliveryDefaults(at, p)
		if p.Source.Type == "kafka" {
			setDefault(c, at+"source.start", &p.Source.Start, "earliest")
			setDefault(c, at+"source.instance_id", &p.Source.InstanceID, AutoInstanceID)
			setDefault(c, at+"source.session_timeout", &p.Source.SessionTimeout.Duration, kafka.DefaultSessionTimeout)
		}
		if p.Source.Type == "generate" && unset(at+"source.keys") {
			p.Source.Keys = DefaultKeys
		}
		setDefault(c, at+"sink.compression", &p.Sink.Compression, "none")
		setDefault(c, at+"sink.max_record_bytes", &p.Sink.MaxRecordBytes, kafka.DefaultMaxRecordBytes)
		for j := range p.Transforms {
			s := &p.Transforms[j]
			setDefault(c, fmt.Sprintf("%stransform[%d].name", at, j), &s.Name, fmt.Sprintf("%s-%d", s.Type, j))
		}
	}
	c.schemaRegistryDefaults()
	c.adminDefaults()
	c.consoleDefaults()
	if c.Journal != nil && unset("journal.expiry_interval") {
		c.Journal.ExpiryInterval.Duration = defaultExpiryInterval
	}
	if f := c.Fluid; f != nil {
		setDefault(c, "fluid.metadata", &f.Metadata, ".fluid")
		f.Metadata = c.Resolve(f.Metadata)
		setDefault(c, "fluid.state_topic", &f.StateTopic, fluid.DefaultStateTopic)
	}
}

// defaultExpiryInterval is how often expired journals are purged.
const defaultExpiryInterval = time.Minute

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

func oneOf(v string, allowed ...string) bool { return slices.Contains(allowed, v) }

func (c *Config) validate() error {
	k := &checker{c: c}
	bad := k.bad
	if !oneOf(c.Log.Level, "debug", "info", "warn", "error") {
		bad("log.level", "must be debug, info, warn or error, not %q", c.Log.Level)
	}
	if !oneOf(c.Log.Format, "text", "json") {
		bad("log.format", "must be text or json, not %q", c.Log.Format)
	}
	k.nonEmpty("data_dir", c.DataDir, "a directory", "data")
	if len(c.Kafka.Brokers) == 0 && !c.noBrokers {
		bad("kafka", "set kafka.brokers or [kafka.embedded]")
	}
	k.nonEmpty("kafka.client_id", c.Kafka.ClientID, "a client id", "streamd")
	k.int("kafka.partitions", int64(c.Kafka.Partitions), rangePartitions)
	if e := c.Kafka.Embedded; e != nil {
		k.nonEmpty("kafka.embedded.listen", e.Listen, "host:port", "127.0.0.1:9092")
		k.nonEmpty("kafka.embedded.data_dir", e.DataDir, "a directory", "<data_dir>/broker")
		k.embeddedRetention(e)
	}
	k.nonEmpty("plugins.cache_dir", c.Plugins.CacheDir, "a directory", "<data_dir>/wasm-cache")
	k.int("plugins.max_memory_pages", int64(c.Plugins.MaxMemoryPages), rangeMemoryPages)
	k.int("plugins.max_table_elements", int64(c.Plugins.MaxTableElements), rangeTableElements)
	k.int("plugins.max_module_bytes", c.Plugins.MaxModuleBytes, rangeModuleBytes)
	k.dur("plugins.compile_timeout", c.Plugins.CompileTimeout.Duration, rangeCompileTimeout)
	k.int("plugins.max_log_line_bytes", int64(c.Plugins.MaxLogLineBytes), rangeLogLineBytes)
	k.int("plugins.max_log_lines_per_record", int64(c.Plugins.MaxLogLinesPerRecord), rangeLogLines)
	k.int("plugins.max_log_bytes_per_record", int64(c.Plugins.MaxLogBytesPerRecord), rangeLogBytes)
	k.dur("plugins.timeout", c.Plugins.Timeout.Duration, rangePluginTimeout)
	k.dur("plugins.load_timeout", c.Plugins.LoadTimeout.Duration, rangeLoadTimeout)
	k.dur("plugins.watch", c.Plugins.Watch.Duration, rangeWatch)
	if len(c.Pipelines) == 0 && c.Journal == nil && c.Fluid == nil {
		bad("pipeline", "no [[pipeline]] defined")
	}
	seen := map[string]bool{}
	stdinAt := "" // the pipeline that reads standard input
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		at := fmt.Sprintf("pipeline[%d]", i)
		switch {
		case p.Name == "":
			bad(at+".name", "required key is missing")
		case !nameRE.MatchString(p.Name):
			bad(at+".name", "%q: use letters, digits, '.', '_' and '-'", p.Name)
		case seen[p.Name]:
			bad(at+".name", "pipeline %q is defined twice", p.Name)
		}
		seen[p.Name] = true
		k.int(at+".workers", int64(p.Workers), rangeWorkers)
		k.dur(at+".shutdown_timeout", p.ShutdownTimeout.Duration, rangeShutdown)
		k.dur(at+".commit_interval", p.CommitInterval.Duration, rangeCommitInterval)
		k.dur(at+".stall_timeout", p.StallTimeout.Duration, rangeStallTimeout)
		k.int(at+".batch.max_records", int64(p.Batch.MaxRecords), rangeMaxRecords)
		k.int(at+".batch.max_bytes", int64(p.Batch.MaxBytes), rangeMaxBytes)
		k.dur(at+".batch.linger", p.Batch.Linger.Duration, rangeLinger)
		switch {
		case !rangeMaxInFlight.ok(int64(p.MaxInFlight)):
			k.int(at+".max_in_flight", int64(p.MaxInFlight), rangeMaxInFlight)
		case p.MaxInFlight < p.Batch.MaxRecords && rangeMaxRecords.ok(int64(p.Batch.MaxRecords)):
			bad(at+".max_in_flight", "%d is below batch.max_records %d (allowed: %d to %d)",
				p.MaxInFlight, p.Batch.MaxRecords, p.Batch.MaxRecords, rangeMaxInFlight.hi)
		}
		s := &p.Source
		switch s.Type {
		case "":
			bad(at+".source.type", "required key is missing (kafka, generate, file or stdin)")
		case "kafka":
			if len(s.Topics) == 0 && s.TopicsRegex == "" {
				bad(at+".source.topics", "required for a kafka source (or topics_regex)")
			}
			if s.Group == "" {
				bad(at+".source.group", "required for a kafka source")
			}
			if !oneOf(s.Start, "earliest", "latest") {
				bad(at+".source.start", "must be earliest or latest, not %q", s.Start)
			}
			k.dur(at+".source.session_timeout", s.SessionTimeout.Duration, rangeSessionTimeout)
		case "generate":
		case "file":
			if s.Path == "" {
				bad(at+".source.path", "required for a file source")
			}
		case "stdin":
			if stdinAt != "" {
				bad(at+".source.type", "%s already reads standard input: one pipeline may (allowed: one stdin source)", stdinAt)
			}
			stdinAt = at
		default:
			bad(at+".source.type", "unknown source type %q (want kafka, generate, file or stdin)", s.Type)
		}
		if s.Type == "generate" || c.isSet(at+".source.rate") {
			if !(s.Rate >= 0 && s.Rate <= maxRate) { // NaN too
				bad(at+".source.rate", "%s is out of range (allowed: 0 (as fast as possible) to %s)", fmtFloat(s.Rate), fmtFloat(maxRate))
			}
		}
		if s.Type == "generate" || c.isSet(at+".source.count") {
			k.int(at+".source.count", s.Count, rangeCount)
		}
		if s.Type == "generate" || c.isSet(at+".source.keys") {
			k.int(at+".source.keys", int64(s.Keys), rangeKeys)
		}
		if s.Fluid != nil {
			if s.Type != "kafka" {
				bad(at+".source.fluid", "only a kafka source can be a fluid consumer")
			}
			k.int(at+".source.fluid.compatible_version", int64(s.Fluid.CompatibleVersion), rangeVersion)
		}
		for j := range p.Transforms {
			t := &p.Transforms[j]
			tat := fmt.Sprintf("%s.transform[%d]", at, j)
			k.nonEmpty(tat+".name", t.Name, "a stage name", "<type>-<index>")
			switch t.Type {
			case "wasm", "native":
				if (t.Path == "") == (t.Plugin == "") {
					bad(tat, "set exactly one of path or plugin")
				}
			case "codec":
				if (t.Codec == "") == (t.Plugin == "" && t.Path == "") {
					bad(tat, "set exactly one of codec (built in) or plugin")
				}
				if !oneOf(t.Mode, "encode", "decode") {
					bad(tat+".mode", "must be encode or decode, not %q", t.Mode)
				}
				if t.Codec != "" {
					k.codecLevel(tat, t.Codec, t.Level)
				}
			case "schema":
				c.validateSchemaStage(t, tat, bad)
				if t.Version == 0 && c.isSet(tat+".version") {
					k.int(tat+".version", 0, rangeVersion)
				}
			case "":
				bad(tat+".type", "required key is missing (wasm, native, codec or schema)")
			default:
				bad(tat+".type", "unknown stage type %q (want wasm, native, codec or schema)", t.Type)
			}
			k.pluginSettings(tat, &t.PluginSettings)
		}
		o := &p.Sink
		switch o.Type {
		case "":
			bad(at+".sink.type", "required key is missing")
		case "kafka":
			if o.Topic == "" {
				bad(at+".sink.topic", "required for a kafka sink")
			}
			if !oneOf(o.Compression, "none", "gzip", "snappy", "lz4", "zstd") {
				bad(at+".sink.compression", "must be none, gzip, snappy, lz4 or zstd, not %q", o.Compression)
			} else if o.CompressionLevel != 0 {
				if r, ok := kafkaLevels[o.Compression]; !ok {
					bad(at+".sink.compression_level", "%d: %s has no levels (allowed: 0, or leave the key out)", o.CompressionLevel, o.Compression)
				} else if o.CompressionLevel < r[0] || o.CompressionLevel > r[1] {
					bad(at+".sink.compression_level", "%d is out of range (allowed: %d to %d for %s, or 0 for its default)", o.CompressionLevel, r[0], r[1], o.Compression)
				}
			}
			if !oneOf(o.Partition, "", "same", "hash") {
				bad(at+".sink.partition", "must be \"same\" or \"hash\" (the default), not %q", o.Partition)
			}
			if o.MaxRecordBytes < 512 || o.MaxRecordBytes > 1<<30 {
				bad(at+".sink.max_record_bytes", "%d is out of range (allowed: 512 to %d)", o.MaxRecordBytes, 1<<30)
			}
			if p.readsTopic(p.sinkCluster(), o.Topic) {
				bad(at+".sink.topic", "%q is also this pipeline's source topic: every record written would be read again, forever (allowed: a topic not in source.topics, or on another cluster)", o.Topic)
			}
		case "file":
			if o.Path == "" {
				bad(at+".sink.path", "required for a file sink")
			}
		case "stdout", "drop":
		case "wasm", "native":
			if o.Plugin == "" {
				bad(at+".sink.plugin", "required for a %s sink", o.Type)
			}
		case "journal":
			if c.Journal == nil || c.Journal.Store == "" {
				bad(at+".sink.type", "a journal sink needs [journal] store = ...")
			}
		default:
			bad(at+".sink.type", "unknown sink type %q (want kafka, file, stdout, drop, wasm, native or journal)", o.Type)
		}
		k.pluginSettings(at+".sink", &o.PluginSettings)
		e := &p.Errors
		switch e.Policy {
		case "dlq":
			switch {
			case e.DLQTopic == "":
				bad(at+".errors.dlq_topic", "required with policy = \"dlq\"")
			case p.readsTopic(p.dlqCluster(), e.DLQTopic):
				bad(at+".errors.dlq_topic", "%q is also this pipeline's source topic: every record dead-lettered would be read again, forever (allowed: a topic not in source.topics, or on another cluster)", e.DLQTopic)
			}
		case "stop", "drop":
		default:
			bad(at+".errors.policy", "must be dlq, stop or drop, not %q", e.Policy)
		}
		k.dur(at+".errors.retry_initial", e.RetryInitial.Duration, rangeRetry)
		switch {
		case !rangeRetry.ok(e.RetryMax.Duration):
			k.dur(at+".errors.retry_max", e.RetryMax.Duration, rangeRetry)
		case e.RetryMax.Duration < e.RetryInitial.Duration && rangeRetry.ok(e.RetryInitial.Duration):
			bad(at+".errors.retry_max", "%q is below retry_initial %q (allowed: %s to %s)", shortDur(e.RetryMax.Duration),
				shortDur(e.RetryInitial.Duration), quoteDur(e.RetryInitial.Duration), quoteDur(rangeRetry.hi))
		}
		k.int(at+".errors.retry_attempts", int64(e.RetryAttempts), rangeRetryAttempts)
		c.validateKafkaClients(k, at, p)
		c.validateDelivery(k, at, p)
		names := map[string]bool{}
		for j := range p.Tests {
			t := &p.Tests[j]
			tat := fmt.Sprintf("%s.test[%d]", at, j)
			if t.Name == "" {
				t.Name = fmt.Sprintf("test-%d", j+1)
			}
			switch {
			case !nameRE.MatchString(t.Name):
				bad(tat+".name", "%q: use letters, digits, '.', '_' and '-'", t.Name)
			case names[t.Name]:
				bad(tat+".name", "test %q is defined twice", t.Name)
			}
			names[t.Name] = true
			if t.Input == "" {
				bad(tat+".input", "required key is missing (a JSON-lines file of source records)")
			}
			if t.DLQ != "" && e.Policy != "dlq" {
				bad(tat+".dlq", "the pipeline's error policy is %q: nothing goes to a dead-letter queue (allowed: with policy = \"dlq\")", e.Policy)
			}
		}
	}
	c.validateKafka(k)
	c.checkLoops(k)
	c.validateAdmin(k)
	c.validateConsole(k)
	c.validateSchemaRegistry(bad)
	if j := c.Journal; j != nil {
		if kind, _ := c.JournalStore(); j.Store != "" && kind == StoreUnknown {
			bad("journal.store", "want sqlite:PATH, postgres://..., wasm:PATH or native:PATH, not %q", j.Store)
		}
		k.dur("journal.expiry_interval", j.ExpiryInterval.Duration, rangeExpiry)
	}
	if f := c.Fluid; f != nil {
		k.nonEmpty("fluid.metadata", f.Metadata, "a directory", ".fluid")
		k.nonEmpty("fluid.state_topic", f.StateTopic, "a topic", fluid.DefaultStateTopic)
		k.int("fluid.baseline_version", int64(f.BaselineVersion), rangeBaselineVer)
	}
	return k.err()
}

// pluginSettings checks the limits a stage or sink sets for its plugin; an
// absent one inherits [plugins].
func (k *checker) pluginSettings(at string, ps *PluginSettings) {
	if k.c.isSet(at + ".pool") {
		k.int(at+".pool", int64(ps.Pool), rangePool)
	}
	if k.c.isSet(at + ".max_memory_pages") {
		k.int(at+".max_memory_pages", int64(ps.MaxMemoryPages), rangeMemoryPages)
	}
	if k.c.isSet(at + ".max_table_elements") {
		k.int(at+".max_table_elements", int64(ps.MaxTableElements), rangeTableElements)
	}
	if k.c.isSet(at + ".timeout") {
		k.dur(at+".timeout", ps.Timeout.Duration, rangePluginTimeout)
	}
}

// codecLevel checks a built-in codec stage's codec and level.
func (k *checker) codecLevel(at, name string, level int) {
	lo, hi, ok := codecs.Levels(name)
	switch {
	case !ok:
		k.bad(at+".codec", "unknown codec %q (allowed: %s)", name, strings.Join(codecs.Names(), ", "))
	case level != 0 && (level < lo || level > hi):
		k.bad(at+".level", "%d is out of range (allowed: %d to %d for %s, or 0 for its default)", level, lo, hi, name)
	}
}

// checkLoops refuses pipelines whose kafka sinks lead, through other
// pipelines of the file, back to their own source topics: each record
// would go round forever. (A pipeline that writes its own source topic is
// refused by validate with a message of its own.) The loop is reported
// once, at the pipeline that closes it in file order.
func (c *Config) checkLoops(k *checker) {
	// Topics are per cluster: a pipeline that reads "orders" on one
	// cluster and writes "orders" on another mirrors, it does not loop.
	readers := func(t clusterTopic) []int {
		var rs []int
		for i := range c.Pipelines {
			if c.Pipelines[i].readsTopic(t.cluster, t.topic) {
				rs = append(rs, i)
			}
		}
		return rs
	}
	writes := func(i int) clusterTopic {
		if p := &c.Pipelines[i]; p.Sink.Type == "kafka" {
			return clusterTopic{p.sinkCluster(), p.Sink.Topic}
		}
		return clusterTopic{}
	}
	name := func(t clusterTopic) string {
		if t.cluster == DefaultCluster {
			return t.topic
		}
		return t.cluster + ":" + t.topic
	}
	for j := range c.Pipelines {
		p := &c.Pipelines[j]
		w := writes(j)
		if p.Source.Type != "kafka" || w.topic == "" || p.readsTopic(w.cluster, w.topic) {
			continue
		}
		// Depth-first from j's sink topic through pipelines before j.
		type step struct {
			topic clusterTopic
			via   []int
		}
		seenTopic := map[clusterTopic]bool{}
		stack := []step{{w, nil}}
		for len(stack) > 0 {
			st := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seenTopic[st.topic] {
				continue
			}
			seenTopic[st.topic] = true
			for _, r := range readers(st.topic) {
				if r == j && len(st.via) > 0 {
					path := name(w)
					for _, v := range st.via {
						path += " -> " + c.Pipelines[v].Name + " -> " + name(writes(v))
					}
					path += " -> " + p.Name + " -> " + name(w)
					k.bad(fmt.Sprintf("pipeline[%d].sink.topic", j), "%q closes a loop of topics (%s): every record would go round forever (allowed: topics that do not lead back to a source)", w.topic, path)
					stack = nil
					break
				}
				if r < j && writes(r).topic != "" {
					stack = append(stack, step{writes(r), append(slices.Clip(st.via), r)})
				}
			}
		}
	}
}

// setDefault sets *field to v unless the file sets the key at path (see
// setDefaults).
func setDefault[T any](c *Config, path string, field *T, v T) {
	if !c.isSet(path) {
		*field = v
	}
}
