package kgox

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
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

// TestAskAgain: when ask is called again, and what AskAgain returns.
func TestAskAgain(t *testing.T) {
	errBusy := errors.New("busy")
	for _, tc := range []struct {
		name    string
		wait    time.Duration
		againN  int // ask answers again for its first againN calls
		cancel  time.Duration
		wantAt  []time.Duration
		wantErr error
	}{
		{"answered at once", time.Second, 0, 0, []time.Duration{0}, nil},
		{"answered the third time", time.Second, 2, 0, []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond}, nil},
		{"never answered", time.Second, 99, 0, []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond, 1300 * time.Millisecond}, errBusy},
		{"no wait", 0, 99, 0, []time.Duration{0}, errBusy},
		{"ctx ends during a wait", time.Second, 99, 200 * time.Millisecond, []time.Duration{0, 100 * time.Millisecond}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.cancel > 0 {
					time.AfterFunc(tc.cancel, cancel)
				}
				start := time.Now()
				var at []time.Duration
				err := AskAgain(ctx, tc.wait, func() (bool, error) {
					at = append(at, time.Since(start))
					if len(at) <= tc.againN {
						return true, errBusy
					}
					return false, nil
				})
				if !errors.Is(err, tc.wantErr) || !slices.Equal(at, tc.wantAt) {
					t.Fatalf("asked at %v, returned %v; want %v, %v", at, err, tc.wantAt, tc.wantErr)
				}
			})
		})
	}
}
