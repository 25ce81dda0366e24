package embedded

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config configures an embedded broker.
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
}

// Broker is a running embedded broker.
type Broker = kfake.Cluster

// Start starts a broker.
func Start(c Config) (*Broker, error) {
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
	opts := []kfake.Opt{
		kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(c.DataDir),
		kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(int(max(1, c.Partitions))),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, portStr))
		}),
	}
	if c.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	b, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded broker on %s (data %s): %w", c.Listen, c.DataDir, err)
	}
	return b, nil
}
