package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnsureTopics creates the topics that do not exist yet, with partitions
// partitions and replication factor 1 or, when the cluster has more brokers,
// the broker default (-1).
func EnsureTopics(ctx context.Context, cl *kgo.Client, partitions int32, topics ...string) error {
	_, err := ensureTopics(ctx, cl, nil, partitions, topics...)
	return err
}

// ensureTopic is EnsureTopics for one topic; it reports whether it created
// it.
func ensureTopic(ctx context.Context, cl *kgo.Client, c *Cluster, partitions int32, topic string) (bool, error) {
	created, err := ensureTopics(ctx, cl, c, partitions, topic)
	return len(created) > 0, err
}

// ensureTopics creates the topics metadata says are missing, with the
// replication factor and configs of cluster c (nil: the defaults). It
// asks first because a user without CREATE gets TOPIC_AUTHORIZATION_FAILED
// from CreateTopics even for a topic that exists.
func ensureTopics(ctx context.Context, cl *kgo.Client, c *Cluster, partitions int32, topics ...string) (created []string, err error) {
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	var missing []string
	for _, t := range topics {
		d, ok := md.Topics[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) || d.Err != nil && !errors.Is(d.Err, kerr.LeaderNotAvailable) {
			// Unknown, or not described (then CreateTopics says why).
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	rf, configs := c.topicSettings()
	if rf == 0 {
		rf = -1
		if len(md.Brokers) == 1 {
			rf = 1
		}
	}
	resp, err := adm.CreateTopics(ctx, partitions, rf, configs, missing...)
	if err != nil {
		return nil, fmt.Errorf("create topics %v: %w", missing, err)
	}
	for _, t := range resp.Sorted() {
		switch {
		case t.Err == nil:
			created = append(created, t.Topic)
		case !errors.Is(t.Err, kerr.TopicAlreadyExists):
			return created, fmt.Errorf("create topic %s: %w", t.Topic, t.Err)
		}
	}
	return created, nil
}
