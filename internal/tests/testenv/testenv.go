// Package testenv gives tests the services they need in one way for the
// whole repository: a Kafka broker (in-process kfake, or the real Apache
// Kafka named by STREAMD_TEST_KAFKA_BROKERS), tools on PATH, and the rule
// that with STREAMD_REQUIRE_ALL=1 a missing service fails the test instead of
// skipping it.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RequireAll reports whether STREAMD_REQUIRE_ALL=1: no test may skip for a
// missing tool or service.
func RequireAll() bool { return os.Getenv("STREAMD_REQUIRE_ALL") == "1" }

// Missing skips the test because what is unavailable, or fails it when
// RequireAll is set.
func Missing(tb testing.TB, what string) {
	tb.Helper()
	if RequireAll() {
		tb.Fatalf("STREAMD_REQUIRE_ALL=1 and %s is not available", what)
	}
	tb.Skipf("SKIP (not available here): %s", what)
}

// Tool returns the path of a command on PATH, or calls Missing.
func Tool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, "command "+name+" (run scripts/install-tools)")
	}
	return p
}

// Broker is a Kafka cluster for one test.
type Broker struct {
	// Seeds are the bootstrap addresses.
	Seeds []string
	// Real is true for a real Apache Kafka broker, false for kfake.
	Real bool
	// Cluster is the in-process kfake cluster, or nil when Real.
	Cluster *kfake.Cluster
}

var topicSeq atomic.Int64

// Kafka returns the broker the test suite runs against. With
// STREAMD_TEST_KAFKA_BROKERS set (comma-separated) it is that real broker,
// shared by every test; otherwise a fresh in-process kfake cluster that is
// closed when the test ends.
func Kafka(tb testing.TB, opts ...kfake.Opt) *Broker {
	tb.Helper()
	if s := os.Getenv("STREAMD_TEST_KAFKA_BROKERS"); s != "" {
		return &Broker{Seeds: strings.Split(s, ","), Real: true}
	}
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		tb.Fatalf("kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return &Broker{Seeds: c.ListenAddrs(), Cluster: c}
}

// Topic returns a topic name unique to this test run, so tests sharing a
// real broker never see each other's records.
func Topic(tb testing.TB, base string) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(tb.Name())
	return fmt.Sprintf("%s-%s-%d-%d", base, name, time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

// CreateTopic creates topic with n partitions (replication factor 1).
func (b *Broker) CreateTopic(tb testing.TB, topic string, n int32) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Seeds...))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, n, 1, nil, topic)
	if err != nil {
		tb.Fatalf("create topic %s: %v", topic, err)
	}
	if resp.Err != nil && !strings.Contains(resp.Err.Error(), "TOPIC_ALREADY_EXISTS") {
		tb.Fatalf("create topic %s: %v", topic, resp.Err)
	}
}

// Client returns a franz-go client on the broker, closed when the test ends.
func (b *Broker) Client(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Seeds...)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// SchemaRegistry returns the base URL of the Confluent-compatible Schema
// Registry named by STREAMD_TEST_SCHEMA_REGISTRY_URL (scripts/schema-registry
// start prints it; for Apicurio it ends in /apis/ccompat/v7), or calls
// Missing. The registry is shared by every test: use subjects unique to the
// test (Topic gives such names).
func SchemaRegistry(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("STREAMD_TEST_SCHEMA_REGISTRY_URL")
	if u == "" {
		Missing(tb, "a Schema Registry (scripts/schema-registry start; STREAMD_TEST_SCHEMA_REGISTRY_URL)")
	}
	return strings.TrimRight(u, "/")
}
