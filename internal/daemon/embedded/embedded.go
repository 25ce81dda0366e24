package embedded

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamd/streamd/internal/daemon/defaults"
)

// Config configures an embedded broker. Zero values mean the defaults
// (the Default* constants).
type Config struct {
	// Listen is the host:port to listen on.
	Listen string
	// DataDir is where partitions, offsets and producer IDs persist; it is
	// created if missing.
	DataDir string
	// SyncWrites fsyncs every write.
	SyncWrites bool
	// Partitions is the partition count of topics created on demand; 0
	// or less is 1.
	Partitions int32
	// Logger, when set, gets the broker's storage errors (at most one
	// line per storageLogEvery, with how many more there were) and its
	// retention's warnings.
	Logger *slog.Logger

	// Retention is how long a record is kept, counted from its
	// timestamp, on every topic that does not set retention.ms itself
	// (the broker's log.retention.ms); negative keeps records forever.
	Retention time.Duration
	// RetentionBytes bounds each partition of every topic that does not
	// set retention.bytes itself (the broker's log.retention.bytes): the
	// oldest records go first; negative is no bound.
	RetentionBytes int64
	// SegmentBytes is the size at which a partition's log rolls to a new
	// segment file (log.segment.bytes). Disk, the file's read handle and
	// the broker's in-memory index of its batches are freed a whole
	// segment at a time, so it is also the granularity of retention.
	SegmentBytes int64
	// DiskBudget bounds the whole data directory: past DiskWarnRatio of
	// it the broker warns, past it the largest partitions lose their
	// oldest records until the directory fits; negative is no budget.
	DiskBudget int64
	// RetentionCheck is how often retention and the disk budget are
	// applied.
	RetentionCheck time.Duration
}

// Defaults of Config: a laptop holds them, and a broker left running for
// weeks stays within them. The numbers live in internal/daemon/defaults,
// which the config reads without importing this package.
const (
	// DefaultRetention keeps a day of records.
	DefaultRetention = defaults.EmbeddedRetention
	// DefaultRetentionBytes keeps at most 1 GiB per partition.
	DefaultRetentionBytes = defaults.EmbeddedRetentionBytes
	// DefaultSegmentBytes rolls segments at 16 MiB.
	DefaultSegmentBytes = defaults.EmbeddedSegmentBytes
	// DefaultDiskBudget bounds the data directory at 8 GiB.
	DefaultDiskBudget = defaults.EmbeddedDiskBudget
	// DefaultRetentionCheck applies retention every 10 seconds.
	DefaultRetentionCheck = defaults.EmbeddedRetentionCheck
)

// DiskWarnRatio is the share of the disk budget past which the broker
// warns (a log line and streamd_embedded_disk_budget_used_ratio).
const DiskWarnRatio = 0.8

// withDefaults returns c with its zero values replaced by the defaults.
func (c Config) withDefaults() Config {
	if c.Partitions <= 0 {
		c.Partitions = 1
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = DefaultRetentionBytes
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.DiskBudget == 0 {
		c.DiskBudget = DefaultDiskBudget
	}
	if c.RetentionCheck <= 0 {
		c.RetentionCheck = DefaultRetentionCheck
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Broker is a running embedded broker.
type Broker struct {
	*kfake.Cluster
	storage *storageLog
	ret     *retainer
}

// StorageError returns the error the broker last got writing its data
// under the data directory (a full disk: "no space left on device"), or
// nil if it got none in the last StorageErrorTTL. kfake answers a produce
// it could not persist with UNKNOWN_SERVER_ERROR and nothing more; this
// says why.
func (b *Broker) StorageError() error {
	if b == nil || b.storage == nil {
		return nil
	}
	return b.storage.recent(time.Now())
}

// StorageErrorTTL is how long a storage error counts after it last
// happened: a full disk fails every write, so it stays fresh while the
// disk is full.
const StorageErrorTTL = 30 * time.Second

// storageLogEvery bounds how often storage errors are logged.
const storageLogEvery = 10 * time.Second

// storageLog is the broker's kfake.Logger: it keeps its latest storage
// error (a warning or error with a file system error among its arguments)
// and logs such errors, at most one line per storageLogEvery.
type storageLog struct {
	log *slog.Logger

	mu         sync.Mutex
	err        error
	at         time.Time
	logged     time.Time
	suppressed int
}

// Logf implements kfake.Logger.
func (l *storageLog) Logf(level kfake.LogLevel, format string, args ...any) {
	if level == kfake.LogLevelNone || level > kfake.LogLevelWarn {
		return // info and debug: every request
	}
	var cause error
	for _, a := range args {
		if err, ok := a.(error); ok && isStorage(err) {
			cause = err
		}
	}
	if cause == nil {
		return
	}
	err := &storageError{msg: fmt.Sprintf(format, args...), err: cause}
	now := time.Now()
	l.mu.Lock()
	l.err, l.at = err, now
	logNow := l.log != nil && now.Sub(l.logged) >= storageLogEvery
	suppressed := l.suppressed
	if logNow {
		l.logged, l.suppressed = now, 0
	} else {
		l.suppressed++
	}
	l.mu.Unlock()
	if logNow {
		l.log.Warn("embedded broker cannot write its data", "err", err, "more_since_last", suppressed)
	}
}

func (l *storageLog) recent(now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil || now.Sub(l.at) > StorageErrorTTL {
		return nil
	}
	return l.err
}

// isStorage reports whether err is a file system's error.
func isStorage(err error) bool {
	var pe *fs.PathError
	var le *os.LinkError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &errno)
}

// storageError is one of the broker's storage errors: kfake's message
// (what it was writing), wrapping the file system's error.
type storageError struct {
	msg string
	err error
}

func (e *storageError) Error() string { return e.msg }
func (e *storageError) Unwrap() error { return e.err }

// Start starts a broker, and its retention (see Config).
func Start(c Config) (*Broker, error) {
	c = c.withDefaults()
	host, portStr, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return nil, fmt.Errorf("embedded broker listen %q: %w", c.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embedded broker listen %q: bad port", c.Listen)
	}
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
		return nil, err
	}
	storage := &storageLog{log: c.Logger}
	opts := []kfake.Opt{
		kfake.WithLogger(storage),
		kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(c.DataDir),
		kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(int(c.Partitions)),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, portStr))
		}),
		// What DescribeConfigs answers for every topic that sets none
		// of its own; the retainer applies them.
		kfake.BrokerConfigs(map[string]string{
			"log.retention.ms":    strconv.FormatInt(retentionMs(c.Retention), 10),
			"log.retention.bytes": strconv.FormatInt(max(-1, c.RetentionBytes), 10),
			"log.segment.bytes":   strconv.FormatInt(c.SegmentBytes, 10),
		}),
	}
	if c.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	cl, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded broker on %s (data %s): %w", c.Listen, c.DataDir, err)
	}
	ret, err := startRetainer(cl, c)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("embedded broker on %s (data %s): %w", c.Listen, c.DataDir, err)
	}
	return &Broker{Cluster: cl, storage: storage, ret: ret}, nil
}

// retentionMs is d as a retention.ms: -1 for forever.
func retentionMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return max(1, d.Milliseconds())
}

// Close stops the broker's retention, then the broker.
func (b *Broker) Close() {
	b.ret.close()
	b.Cluster.Close()
}
