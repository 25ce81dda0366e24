package config

import (
	"fmt"
	"time"
)

// Config is a whole streamd configuration file.
type Config struct {
	// DataDir holds state that is not in Kafka: the Wasm compile cache,
	// the embedded broker's default dir. Default "data".
	DataDir   string     `toml:"data_dir"`
	Admin     Admin      `toml:"admin"`
	Console   Console    `toml:"console"`
	Log       Log        `toml:"log"`
	Kafka     Kafka      `toml:"kafka"`
	Plugins   Plugins    `toml:"plugins"`
	Pipelines []Pipeline `toml:"pipeline"`
	Journal   *Journal   `toml:"journal"`
	Fluid     *Fluid     `toml:"fluid"`
	// SchemaRegistry is [schema_registry] and its [schema_registry.NAME]s.
	SchemaRegistry *SchemaRegistries `toml:"schema_registry"`

	// File is the path the config was loaded from.
	File string `toml:"-"`
	pos  *positions
	raw  map[string]any // the file as plain tables, for isSet
	// interpolated are the values ${ENV} and ${file:} references put in,
	// for Redact.
	interpolated []interpolation
	// noBrokers: kafka.brokers may be left out (LoadForTest).
	noBrokers bool
}

// Admin configures the admin HTTP server.
type Admin struct {
	// Listen is the HTTP address for /healthz /readyz /metrics /pipelines.
	// Empty disables the server. An address that is not loopback needs
	// Auth, TLS with a client CA, or AllowUnauthenticated.
	Listen string `toml:"listen"`
	// TLS serves HTTPS (optionally requiring client certificates).
	TLS *AdminTLS `toml:"tls"`
	// Auth requires bearer tokens.
	Auth *AdminAuth `toml:"auth"`
	// ProbesOpen leaves /healthz and /readyz open when Auth is set
	// (default true).
	ProbesOpen bool `toml:"probes_open"`
	// AllowUnauthenticated serves a non-loopback Listen without auth.
	AllowUnauthenticated bool `toml:"allow_unauthenticated"`
	// Server limits (defaults: defaults.Admin*).
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	ReadTimeout       Duration `toml:"read_timeout"`
	WriteTimeout      Duration `toml:"write_timeout"`
	IdleTimeout       Duration `toml:"idle_timeout"`
	MaxHeaderBytes    int      `toml:"max_header_bytes"`
	MaxBodyBytes      int64    `toml:"max_body_bytes"`
	// Hosts are names the listener answers to besides localhost and the
	// loopback addresses ("name", or "name:port"): a request with another
	// Host is refused (DNS rebinding). Empty on a listener that is not
	// loopback: any Host.
	Hosts []string `toml:"hosts"`
	// MaxStreams bounds the long-lived responses open at once (event
	// streams, taps); MaxStreamsPerToken is one token's (or one client
	// certificate's) share (defaults: defaults.AdminMaxStreams,
	// defaults.AdminMaxStreamsPerToken).
	MaxStreams         int `toml:"max_streams"`
	MaxStreamsPerToken int `toml:"max_streams_per_token"`
}

// Log configures logging.
type Log struct {
	Level  string `toml:"level"`  // debug | info | warn | error (default info)
	Format string `toml:"format"` // text | json (default text)
}

// Kafka says where the brokers are: [kafka] is the default cluster, and
// [kafka.clusters.NAME] are more (see KafkaCluster).
type Kafka struct {
	Brokers  []string  `toml:"brokers"`
	Embedded *Embedded `toml:"embedded"`
	ClientID string    `toml:"client_id"`
	// Partitions is the partition count of topics streamd creates (default 4).
	Partitions int32 `toml:"partitions"`
	KafkaConn
	// Clusters are the named clusters a pipeline's source.cluster,
	// sink.cluster or errors.dlq_cluster pick.
	Clusters map[string]*KafkaCluster `toml:"clusters"`

	def *KafkaCluster // [kafka] as a KafkaCluster, made by setDefaults
}

// Embedded starts an in-process broker (internal/daemon/embedded): one node, for
// development, demos and small deployments on one machine. Its retention
// applies to every topic that sets none of its own, and its disk budget to
// the whole data directory (defaults: defaults.Embedded*).
type Embedded struct {
	Listen  string `toml:"listen"`   // default 127.0.0.1:9092
	DataDir string `toml:"data_dir"` // default <data_dir>/broker
	// SyncWrites fsyncs every write (slower, survives power loss).
	SyncWrites bool `toml:"sync_writes"`
	// Retention is how long a record is kept, counted from its timestamp
	// (log.retention.ms); negative keeps records forever.
	Retention Duration `toml:"retention"`
	// RetentionBytes bounds each partition (log.retention.bytes); -1 is
	// no bound.
	RetentionBytes int64 `toml:"retention_bytes"`
	// SegmentBytes is the size of a partition's segment files
	// (log.segment.bytes): retention frees disk and memory a segment at a
	// time.
	SegmentBytes int64 `toml:"segment_bytes"`
	// DiskBudgetBytes bounds the whole data directory: a warning at 80%,
	// past it the largest partitions lose their oldest records; -1 is no
	// budget.
	DiskBudgetBytes int64 `toml:"disk_budget_bytes"`
	// RetentionCheckInterval is how often retention and the budget are
	// applied.
	RetentionCheckInterval Duration `toml:"retention_check_interval"`
}

// Plugins holds defaults for every plugin.
type Plugins struct {
	// CacheDir holds compiled Wasm modules (default <data_dir>/wasm-cache).
	CacheDir string `toml:"cache_dir"`
	// MaxMemoryPages is the default memory cap of a Wasm instance (64 KiB pages).
	MaxMemoryPages uint32 `toml:"max_memory_pages"`
	// MaxTableElements is the default cap of each table of a Wasm instance
	// (elements of 8 bytes).
	MaxTableElements uint32 `toml:"max_table_elements"`
	// MaxModuleBytes caps the size of a Wasm module file.
	MaxModuleBytes int64 `toml:"max_module_bytes"`
	// CompileTimeout bounds compiling a Wasm module.
	CompileTimeout Duration `toml:"compile_timeout"`
	// MaxLogLineBytes caps one line a Wasm guest logs; MaxLogLinesPerRecord
	// and MaxLogBytesPerRecord bound what it logs in one call, per record.
	MaxLogLineBytes      int `toml:"max_log_line_bytes"`
	MaxLogLinesPerRecord int `toml:"max_log_lines_per_record"`
	MaxLogBytesPerRecord int `toml:"max_log_bytes_per_record"`
	// Timeout is the default bound of one plugin call.
	Timeout Duration `toml:"timeout"`
	// LoadTimeout bounds loading one plugin: reading, compiling and
	// instantiating a Wasm module, starting a native plugin (default 2m,
	// above compile_timeout).
	// A pipeline whose plugin does not load in time fails alone.
	LoadTimeout Duration `toml:"load_timeout"`
	// Watch is how often Wasm plugin files are checked for changes and hot
	// reloaded (default "1s"; "0s" disables; SIGHUP reloads at once).
	Watch *Duration `toml:"watch"`
}

// Pipeline is one consume -> transform -> produce pipeline.
type Pipeline struct {
	Name       string  `toml:"name"`
	Source     Source  `toml:"source"`
	Transforms []Stage `toml:"transform"`
	Sink       Sink    `toml:"sink"`
	Errors     Errors  `toml:"errors"`
	Batch      Batch   `toml:"batch"`
	// MaxInFlight bounds records read but not yet committed; fetching
	// pauses above it (default 50000).
	MaxInFlight int `toml:"max_in_flight"`
	// ShutdownTimeout bounds draining on SIGINT/SIGTERM (default 30s).
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// CommitInterval is how often acknowledged offsets are committed
	// (default 1s); "0s" commits after every acknowledged batch, which
	// bounds the records replayed after a crash by max_in_flight.
	CommitInterval *Duration `toml:"commit_interval"`
	// Workers is how many batches are transformed at once (default 2).
	Workers int `toml:"workers"`
	// Paused starts the pipeline paused: it connects (and joins its
	// group) but fetches nothing until `streamd ctl resume NAME`. A
	// reload that flips it pauses or resumes the pipeline without a
	// restart.
	Paused bool `toml:"paused"`
	// StallTimeout is how long the pipeline may have work pending (records
	// in flight, or a source partition whose lag cannot be measured) and
	// acknowledge nothing before /readyz reports it stalled (default 30s;
	// "0s" never).
	StallTimeout *Duration `toml:"stall_timeout"`
	// Delivery is "at-least-once" (default) or "exactly-once": a kafka
	// source and sink on one cluster, each transaction's output, dead
	// letters and offsets committed together (docs/delivery.md).
	Delivery string `toml:"delivery"`
	// Transaction sizes an exactly-once pipeline's transactions.
	Transaction Transaction `toml:"transaction"`
	// Tests are fixtures `streamd test` runs the pipeline's stages and
	// error policy over; `streamd run` ignores them.
	Tests []PipelineTest `toml:"test"`
}

// PipelineTest is one [[pipeline.test]]: input records and what the
// pipeline must make of them. Paths are relative to the config file; an
// expectation left out means "none" (no output records, no dead letters,
// no failure).
type PipelineTest struct {
	// Name names the test (default "test-N", N from 1).
	Name string `toml:"name"`
	// Input is a JSON-lines file of source records (required).
	Input string `toml:"input"`
	// Output is a JSON-lines file of the records the sink must receive.
	Output string `toml:"output"`
	// DLQ is a JSON-lines file of the dead letters (policy "dlq").
	DLQ string `toml:"dlq"`
	// Error is text the pipeline's failure must contain: a record rejected
	// under policy "stop", or a plugin that is broken or hangs.
	Error string `toml:"error"`
}

// AutoInstanceID is the instance_id that asks for a generated static
// instance ID kept under data_dir (the default).
const AutoInstanceID = "auto"

// Source is where a pipeline reads.
type Source struct {
	Type string `toml:"type"` // kafka | generate | file

	// kafka
	Topics []string `toml:"topics"`
	Group  string   `toml:"group"`
	Start  string   `toml:"start"` // earliest | latest (default earliest)
	// InstanceID makes this a static group member (KIP-345), so that a
	// restarted process takes its partitions back at once instead of
	// after session_timeout. "auto" (the default): an ID generated once
	// and kept under <data_dir>/instances, one per live process (a second
	// process with the same data_dir gets another); "" (set explicitly):
	// a dynamic member; anything else: that ID.
	InstanceID string `toml:"instance_id"`
	// SessionTimeout is how long the group waits for a silent member
	// (default 45s).
	SessionTimeout Duration     `toml:"session_timeout"`
	Fluid          *SourceFluid `toml:"fluid"`
	// Cluster names a [kafka.clusters.NAME] ("" = [kafka]).
	Cluster string `toml:"cluster"`
	// TopicsRegex, instead of Topics, reads every topic whose name the
	// RE2 expression matches (not anchored: write ^...$), as topics come
	// and go.
	TopicsRegex string `toml:"topics_regex"`
	// IsolationLevel is read_uncommitted (default) or read_committed
	// (skip records of aborted transactions, stop at open ones).
	IsolationLevel string `toml:"isolation_level"`
	// Fetch sizes and wait (defaults: kafka.DefaultFetch*).
	FetchMaxBytes          int32    `toml:"fetch_max_bytes"`
	FetchMaxPartitionBytes int32    `toml:"fetch_max_partition_bytes"`
	FetchMinBytes          int32    `toml:"fetch_min_bytes"`
	FetchMaxWait           Duration `toml:"fetch_max_wait"`
	// GroupProtocol is classic (cooperative-sticky; the default) or
	// consumer (KIP-848 where the broker has it, else classic).
	GroupProtocol string `toml:"group_protocol"`

	// generate: synthetic order JSON records
	Rate  float64 `toml:"rate"`  // records per second, 0 = as fast as possible
	Count int64   `toml:"count"` // total, 0 = unbounded
	Keys  int     `toml:"keys"`  // distinct keys (default 1000)

	// file: JSON lines
	Path string `toml:"path"`
}

// SourceFluid makes a kafka source a Fluid Messaging consumer.
type SourceFluid struct {
	CompatibleVersion int    `toml:"compatible_version"`
	Bridge            string `toml:"bridge"` // bridge base URL (default: this process's admin address)
	// BridgeToken is the bearer token (role read) for a bridge whose admin
	// server requires one ([admin.auth] of the process serving it).
	BridgeToken Secret `toml:"bridge_token"`
}

// Stage is one transform stage.
type Stage struct {
	Type string `toml:"type"` // wasm | native | codec | schema
	Name string `toml:"name"`
	// Path or Plugin name the plugin: "x.wasm", "wasm:x.wasm", "native:./bin".
	Path   string `toml:"path"`
	Plugin string `toml:"plugin"`
	// codec stages
	Codec string `toml:"codec"` // zstd | gzip | snappy | lz4 (built in)
	Mode  string `toml:"mode"`  // encode | decode
	Level int    `toml:"level"`

	// schema stages (type = "schema", mode = encode | decode); see
	// docs/schema-registry.md.
	// Registry names a [schema_registry.NAME] (default: [schema_registry]).
	Registry string `toml:"registry"`
	// Part is the part of the record the stage works on: value (default) or key.
	Part string `toml:"part"`
	// Format is the encoding: avro, protobuf or json (JSON Schema); on
	// encode the default is the schema's own type.
	Format string `toml:"format"`
	// Subject is the subject to encode against; without it the subject
	// comes from SubjectStrategy.
	Subject string `toml:"subject"`
	// SubjectStrategy: topic-name (default, TOPIC-value / TOPIC-key),
	// record-name (the schema's full name) or topic-record-name.
	SubjectStrategy string `toml:"subject_strategy"`
	// Topic is the topic in subject names (default: the record's topic).
	Topic string `toml:"topic"`
	// SchemaFile is the writer schema to encode with (.avsc, .proto or
	// .json); without it the subject's latest version (or Version) is used.
	SchemaFile string `toml:"schema_file"`
	// Message is the Protobuf message to encode (default: the file's first).
	Message string `toml:"message"`
	// Version pins the subject's version to encode with (no schema_file).
	Version int `toml:"version"`
	// AutoRegister registers SchemaFile under the subject (the registry
	// checks compatibility); false only looks it up.
	AutoRegister bool `toml:"auto_register"`

	PluginSettings
}

// PluginSettings are the settings of a plugin-backed stage or sink.
type PluginSettings struct {
	// Config is passed to the plugin's init, as JSON.
	Config map[string]any `toml:"config"`
	// Pool is how many Wasm instances run in parallel (default: workers).
	Pool int `toml:"pool"`
	// MaxMemoryPages, MaxTableElements and Timeout override [plugins] for
	// this plugin.
	MaxMemoryPages   uint32   `toml:"max_memory_pages"`
	MaxTableElements uint32   `toml:"max_table_elements"`
	Timeout          Duration `toml:"timeout"`
	// Dirs grants a Wasm guest host directories: guest path -> host path
	// (read-write; "path:ro" read-only).
	Dirs map[string]string `toml:"dirs"`
	// Clock grants a Wasm guest the host's wall and monotonic clocks (and
	// sleeps that sleep); without it the guest sees a fixed fake clock.
	Clock bool `toml:"clock"`
	// Random is whether a Wasm guest's random bytes come from crypto/rand
	// (nil: yes); false gives it the same fixed sequence in every instance,
	// for reproducible runs.
	Random *bool `toml:"random"`
	// Checksum is the SHA-256 (hex) a native plugin binary must have.
	Checksum string `toml:"checksum"`
}

// Sink is where a pipeline writes.
type Sink struct {
	Type string `toml:"type"` // kafka | file | stdout | drop | wasm | native | journal

	// kafka
	Topic            string `toml:"topic"`
	Compression      string `toml:"compression"` // none | gzip | snappy | lz4 | zstd
	CompressionLevel int    `toml:"compression_level"`
	Partition        string `toml:"partition"` // "" (key hash, murmur2) | "same"
	// MaxRecordBytes is the largest record batch the producer sends, and
	// so the largest record (key, value, headers + ~100 bytes); a larger
	// record goes to the error policy (default 1048588, Kafka's default
	// message.max.bytes). The dead-letter topic's producer uses it too.
	MaxRecordBytes int `toml:"max_record_bytes"`
	// Cluster names a [kafka.clusters.NAME] ("" = [kafka]).
	Cluster string `toml:"cluster"`
	// Acks is "all" (default: every in-sync replica), "1" (the leader)
	// or "0" (none); anything but all turns off idempotent writes.
	Acks string `toml:"acks"`
	// Linger is how long the producer waits to fill a batch (default 0:
	// the pipeline batches already).
	Linger Duration `toml:"linger"`

	// file
	Path string `toml:"path"`

	// wasm | native plugin sinks
	Plugin string `toml:"plugin"`
	PluginSettings
}

// Errors is a pipeline's error policy.
type Errors struct {
	Policy   string `toml:"policy"` // dlq | stop | drop (default stop)
	DLQTopic string `toml:"dlq_topic"`
	// DLQCluster names the [kafka.clusters.NAME] of the dead-letter topic
	// ("" = the sink's cluster if the sink is kafka, else [kafka]).
	DLQCluster string `toml:"dlq_cluster"`
	// Retry of transient sink errors: capped exponential backoff.
	RetryInitial Duration `toml:"retry_initial"` // default 100ms
	RetryMax     Duration `toml:"retry_max"`     // default 10s
	// RetryAttempts before the pipeline fails (0 = retry forever).
	RetryAttempts int `toml:"retry_attempts"`
}

// Batch is a pipeline's batching policy.
type Batch struct {
	MaxRecords int      `toml:"max_records"` // default 1024
	MaxBytes   int      `toml:"max_bytes"`   // default 1 MiB
	Linger     Duration `toml:"linger"`      // default 5ms
}

// Journal configures the event journal.
type Journal struct {
	// Store is sqlite:PATH | postgres://... | wasm:PATH | native:PATH.
	Store string `toml:"store"`
	// QuarantineTopic receives malformed action records.
	QuarantineTopic string `toml:"quarantine_topic"`
	// ExpiryInterval is how often expired journals are purged (default 1m).
	ExpiryInterval Duration `toml:"expiry_interval"`
	// Config is passed to a plugin store.
	Config map[string]any `toml:"config"`
}

// Fluid enables the Fluid Messaging bridge on the admin address.
type Fluid struct {
	Metadata string `toml:"metadata"` // default ".fluid"
	// BaselineVersion is the version of records without the header (default: the first).
	BaselineVersion int    `toml:"baseline_version"`
	StateTopic      string `toml:"state_topic"`  // default "_streamd_fluid_state"
	TopicSuffix     string `toml:"topic_suffix"` // downgrade topic name suffix
	// Registry is the [schema_registry.NAME] whose subjects a manifest may
	// name instead of schema files ("": [schema_registry], if set).
	Registry string `toml:"registry"`
}

// Duration is a time.Duration written as a string such as "5s" or "250ms".
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"500ms\", \"5s\", \"1m\")", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
