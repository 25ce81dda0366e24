package kgox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicPartitions: a topic that does not exist is reported after the wait
// (at once for no wait), and not created; one created after the client's
// metadata cache was told it is unknown is found at once (kadm's
// ListTopics says unknown for 5 s more).
func TestTopicPartitions(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	adm := kadm.NewClient(cl)

	start := time.Now()
	n, err := TopicPartitions(ctx, cl, "t", UnknownTopicWait)
	if took := time.Since(start); !errors.Is(err, kerr.UnknownTopicOrPartition) || took < UnknownTopicWait {
		t.Fatalf("a missing topic: %d, %v after %v; want UNKNOWN_TOPIC_OR_PARTITION after %v or more", n, err, took, UnknownTopicWait)
	}
	start = time.Now()
	if _, err := TopicPartitions(ctx, cl, "t", 0); !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Since(start) > UnknownTopicWait {
		t.Fatalf("a missing topic, no wait: %v after %v", err, time.Since(start))
	}
	// Cached as unknown by kadm, then created.
	if td, err := adm.ListTopics(ctx, "t"); err != nil || td["t"].Err == nil {
		t.Fatalf("ListTopics before the topic exists: %v %v", td, err)
	}
	if r, err := adm.CreateTopic(ctx, 3, 1, nil, "t"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	if td, err := adm.ListTopics(ctx, "t"); err != nil || td["t"].Err == nil {
		t.Logf("kadm's cache no longer says unknown (franz-go changed?): %v %v", td, err)
	}
	start = time.Now()
	if n, err := TopicPartitions(ctx, cl, "t", UnknownTopicWait); err != nil || n != 3 || time.Since(start) > UnknownTopicWait {
		t.Fatalf("a topic just created: %d, %v after %v; want 3 at once", n, err, time.Since(start))
	}
}
