package journal

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// A topic created after the journal was asked about it (and answered 404)
// is found at the next request: the journal asks the brokers, not a
// metadata cache that remembers the topic as unknown (franz-go keeps a
// metadata answer for MetadataMinAge, 5 s). A user who gets a 404, creates
// the topic and retries must not get 404 again.
func TestAppendTopicCreatedAfter404(t *testing.T) {
	h := newHarness(t, 1)
	key := Key{Topic: h.topic + "-later", ID: "x"}
	if _, _, err := h.j.Pointer(h.ctx, key); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("pointer before the topic exists: %v, want ErrUnknownTopic", err)
	}
	h.broker.CreateTopic(t, key.Topic, 1)
	start := time.Now()
	if _, err := h.j.Append(h.ctx, key, ev(1)); err != nil {
		t.Fatalf("append right after the topic was created (after a 404): %v after %v", err, time.Since(start))
	}
	if p := h.pointer(key); p != 1 {
		t.Fatalf("pointer %d after the append, want 1", p)
	}
}

// A topic the broker answering metadata does not know yet, though it was
// just created (Kafka's brokers apply a new topic some milliseconds after
// CreateTopics returns; more on a loaded machine), is asked about again
// before the journal answers that it does not exist. The test makes the
// topic exist only after the journal's first question, on a kfake of its
// own in every pass (a real broker cannot be made to lag on cue).
func TestAppendTopicVisibleAfterFirstLookup(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic := testenv.Topic(t, "journal")
	// The first metadata request naming the topic is answered by kfake
	// (unknown: it does not exist yet); the topic is created right after.
	created := testenv.CreateAfterFirstLookup(t, c, topic, 1)
	st, err := OpenStore(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "j.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), st)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	j := New(cl, st)
	defer testenv.Close(t, context.Background(), j)
	key := Key{Topic: topic, ID: "x"}
	_, appendErr := j.Append(context.Background(), key, ev(1))
	select {
	case err := <-created:
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the journal never asked about the topic")
	}
	if appendErr != nil {
		t.Fatalf("append to a topic that became visible after the first lookup: %v", appendErr)
	}
}
