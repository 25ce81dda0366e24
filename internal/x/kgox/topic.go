package kgox

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// UnknownTopicWait is the wait to give TopicPartitions for a topic that
// should exist (one a user names): asked at 0, 0.1, 0.4 and 1.3 s before
// it is said not to exist. Kafka's brokers apply a new topic some time after
// CreateTopics has answered: Apache Kafka 4.1 on 2 cores at load 9 knew a
// topic within 52 ms of the answer (100 topics; median 2 ms).
const UnknownTopicWait = time.Second

// TopicPartitions returns topic's partition count, asking a broker: never
// the client's metadata cache, which franz-go keeps for MetadataMinAge
// (5 s) and which keeps a topic unknown for that long after it was
// created (kadm's ListTopics and Metadata answer from it). A topic the
// broker does not know, or knows without leaders yet, is asked about again
// until wait has passed (0: asked once); then the error wraps
// kerr.UnknownTopicOrPartition (or kerr.LeaderNotAvailable). The request
// creates nothing.
func TopicPartitions(ctx context.Context, cl *kgo.Client, topic string, wait time.Duration) (int, error) {
	var n int
	err := AskAgain(ctx, wait, func() (bool, error) {
		var err error
		n, err = topicPartitions(ctx, cl, topic)
		return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.LeaderNotAvailable), err
	})
	return n, err
}

// AskAgain calls ask, and again while it answers again = true, after
// waits of 0.1, 0.3, 0.9 s... (each three times the last) until the waits
// add up to wait; it returns ask's last error, or ctx's if ctx ends during
// a wait. The shape of asking a broker about a topic created a moment
// ago, which it may not know yet.
func AskAgain(ctx context.Context, wait time.Duration, ask func() (again bool, err error)) error {
	var waited time.Duration
	for backoff := 100 * time.Millisecond; ; backoff *= 3 {
		again, err := ask()
		if !again || waited >= wait {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		waited += backoff
	}
}

func topicPartitions(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return 0, err
			}
			return len(t.Partitions), nil
		}
	}
	return 0, kerr.UnknownTopicOrPartition
}
