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
	_, err := ensureTopics(ctx, cl, partitions, topics...)
	return err
}

// ensureTopic is EnsureTopics for one topic; it reports whether it created
// it.
func ensureTopic(ctx context.Context, cl *kgo.Client, partitions int32, topic string) (bool, error) {
	created, err := ensureTopics(ctx, cl, partitions, topic)
	return len(created) > 0, err
}

func ensureTopics(ctx context.Context, cl *kgo.Client, partitions int32, topics ...string) (created []string, err error) {
	adm := kadm.NewClient(cl)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list brokers: %w", err)
	}
	rf := int16(-1)
	if len(brokers) == 1 {
		rf = 1
	}
	resp, err := adm.CreateTopics(ctx, partitions, rf, nil, topics...)
	if err != nil {
		return nil, fmt.Errorf("create topics %v: %w", topics, err)
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
