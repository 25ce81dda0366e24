package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateAfterFirstLookup makes c create topic (with partitions) right
// after it has answered the first metadata request that names it
// (unknown: it does not exist yet), as a real broker that applies a new
// topic a moment after CreateTopics answered; the channel gets the
// creation's error. A real broker cannot be made to lag on cue.
func CreateAfterFirstLookup(tb testing.TB, c *kfake.Cluster, topic string, partitions int32) <-chan error {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	created := make(chan error, 1)
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range req.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil && *rt.Topic == topic {
				c.DropControl()
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
					if err == nil {
						err = resp.Err
					}
					created <- err
				}()
			}
		}
		return nil, nil, false
	})
	return created
}
