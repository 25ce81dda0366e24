package fluid

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDowngradeTopicOfNewTopic: a topic that the broker did not know at the
// bridge's first lookup, and knows a moment later (a topic just created:
// brokers apply it some time after CreateTopics answers), is found, and
// its downgrade topic made, instead of a 404 "does not exist in Kafka".
// Before, the lookup answered from franz-go's metadata cache (kadm
// ListTopics) once and said 404.
func TestDowngradeTopicOfNewTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const topic = "orders" // the metadata's topic
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	meta, err := LoadMetadata(writeMetadata(t, 2))
	must(t, err)
	b, err := NewBridge(context.Background(), WithMetadata(meta), WithLoader(goLoader(0)), WithBrokers(c.ListenAddrs()...),
		WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	must(t, err)
	defer testenv.Close(t, context.Background(), b)
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()

	// The first metadata request naming the topic is answered by kfake
	// (unknown: it does not exist yet); the topic is created right after.
	created := make(chan error, 1)
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range req.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil && *rt.Topic == topic {
				c.DropControl()
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					resp, err := kadm.NewClient(admCl).CreateTopic(ctx, 3, 1, nil, topic)
					if err == nil {
						err = resp.Err
					}
					created <- err
				}()
			}
		}
		return nil, nil, false
	})
	resp, err := http.Get(srv.URL + "/fluid/downgrade-topic?topic=" + topic + "&group=g&compatible-schema-version=1")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	select {
	case err := <-created:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the bridge never asked about the topic")
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("downgrade topic of a topic created just after the first lookup: %d, want 200", resp.StatusCode)
	}
}
