package fluid

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
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
	created := testenv.CreateAfterFirstLookup(t, c, topic, 3)
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

// TestEndOffsetsOfNewTopic: the end offsets of a topic whose partitions a
// broker does not know yet at the first ask (a downgrade topic created a
// moment ago) are asked for again instead of failing: the republisher and
// /fluid/downgrade-offset answered "end offset of orders-fluid-v3/0:
// <nil>" (502) in a trial CI run on Kafka 4.1.
func TestEndOffsetsOfNewTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders-fluid-v1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	meta, err := LoadMetadata(writeMetadata(t, 2))
	must(t, err)
	b, err := NewBridge(context.Background(), WithMetadata(meta), WithLoader(goLoader(0)), WithBrokers(c.ListenAddrs()...),
		WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	must(t, err)
	defer testenv.CloseAtEnd(t, b)
	// The first ListOffsets naming the topic is answered
	// UNKNOWN_TOPIC_OR_PARTITION for each of its partitions.
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.ListOffsetsRequest)
		for _, rt := range r.Topics {
			if rt.Topic != "orders-fluid-v1" || refused.Load() > 0 {
				continue
			}
			refused.Add(1)
			c.DropControl()
			resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
			for _, t := range r.Topics {
				st := kmsg.NewListOffsetsResponseTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewListOffsetsResponseTopicPartition()
					sp.Partition = p.Partition
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		}
		return nil, nil, false
	})
	ends, err := b.endOffsets(context.Background(), "orders-fluid-v1", 0, 1)
	if err != nil {
		t.Fatalf("end offsets of a topic the broker knew a moment later: %v", err)
	}
	if refused.Load() == 0 {
		t.Fatal("no ListOffsets was refused: the test proves nothing")
	}
	if len(ends) != 2 || ends[0] != 0 || ends[1] != 0 {
		t.Fatalf("end offsets %v, want 0 and 0", ends)
	}
	// A partition that does not exist is an error that names it.
	if _, err := b.endOffsets(context.Background(), "orders-fluid-v1", 5); err == nil || !strings.Contains(err.Error(), "orders-fluid-v1/5") {
		t.Fatalf("a partition that does not exist: %v", err)
	}
}
