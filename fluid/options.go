package fluid

import (
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/plugins"
)

// Defaults for bridge options.
const (
	DefaultStateTopic  = "_streamd_fluid_state"
	DefaultLeaderGroup = "streamd-fluid-bridge"
	// DefaultTopicSuffix: the downgrade topic of topic T for version V is
	// T + suffix + V, by default T + "-fluid-v" + V.
	DefaultTopicSuffix = "-fluid-v"

	defaultFetchMaxWait = 250 * time.Millisecond
)

// Option configures a Bridge.
type Option func(*config)

type config struct {
	meta        *Metadata
	metaDir     string
	load        plugins.OpenFunc
	pluginOpts  plugins.Options
	kopts       []kgo.Opt
	stateTopic  string
	leaderGroup string
	instanceID  string
	baseline    int
	replication int16
	suffix      string
	batchSize   int
	log         *slog.Logger
	registry    Registry
}

// WithMetadata uses already loaded metadata.
func WithMetadata(m *Metadata) Option { return func(c *config) { c.meta = m } }

// WithMetadataDir loads the metadata from dir (default ".fluid").
func WithMetadataDir(dir string) Option { return func(c *config) { c.metaDir = dir } }

// WithLoader sets how downgrade plugins are loaded (plugins/load.Open in
// streamd). Without one, republishing fails for any record that needs a
// downgrade.
func WithLoader(l plugins.OpenFunc) Option { return func(c *config) { c.load = l } }

// WithPluginOptions sets the options every downgrade plugin is loaded with
// (Kind and Config are set per plugin).
func WithPluginOptions(o plugins.Options) Option { return func(c *config) { c.pluginOpts = o } }

// WithBrokers sets the Kafka bootstrap addresses.
func WithBrokers(seeds ...string) Option {
	return func(c *config) { c.kopts = append(c.kopts, kgo.SeedBrokers(seeds...)) }
}

// WithKafkaOptions adds franz-go client options (TLS, SASL, ...) to every
// client the bridge makes.
func WithKafkaOptions(opts ...kgo.Opt) Option {
	return func(c *config) { c.kopts = append(c.kopts, opts...) }
}

// WithStateTopic names the compacted topic holding the bridge state
// (default DefaultStateTopic). Every bridge instance of one deployment must
// use the same one.
func WithStateTopic(t string) Option { return func(c *config) { c.stateTopic = t } }

// WithLeaderGroup names the consumer group bridge instances join to elect
// the one that republishes (default DefaultLeaderGroup).
func WithLeaderGroup(g string) Option { return func(c *config) { c.leaderGroup = g } }

// WithInstanceID makes this bridge a static member of the leader group, so
// a restarted instance takes its place at once instead of after the
// session timeout.
func WithInstanceID(id string) Option { return func(c *config) { c.instanceID = id } }

// WithBaselineVersion sets the version of records without the
// HeaderSchemaVersion header (default: the metadata's first version).
func WithBaselineVersion(v int) Option { return func(c *config) { c.baseline = v } }

// WithReplicationFactor sets the replication factor of the topics the
// bridge creates (default 1; -1 for the broker default).
func WithReplicationFactor(n int16) Option { return func(c *config) { c.replication = n } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithTopicSuffix sets the downgrade topic name: topic + suffix + version
// (default DefaultTopicSuffix).
func WithTopicSuffix(s string) Option { return func(c *config) { c.suffix = s } }

// WithBatchSize sets how many records the republisher hands a downgrade
// plugin at once (default 256).
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize = max(1, n) } }
