package kafka_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline/kafka"
)

// assignLog records the generation of every "partitions assigned" line.
type assignLog struct {
	mu   sync.Mutex
	gens []int64
	maps []string
}

func (l *assignLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *assignLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *assignLog) WithGroup(string) slog.Handler            { return l }
func (l *assignLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "partitions assigned" {
		return nil
	}
	gen, parts := int64(-100), ""
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "generation":
			gen = a.Value.Int64()
		case "partitions":
			parts = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	l.gens = append(l.gens, gen)
	l.maps = append(l.maps, parts)
	l.mu.Unlock()
	return nil
}

func (l *assignLog) lines() ([]int64, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.gens...), append([]string(nil), l.maps...)
}

// TestAssignedLogGeneration: every "partitions assigned" line names the
// generation the member has then, also when a cooperative rebalance assigns
// it nothing new (the line used to repeat the generation of the last
// assignment with partitions): a member's lines name newer and newer
// generations, the last one its status's.
func TestAssignedLogGeneration(t *testing.T) {
	b := testenv.Kafka(t)
	topic, group := testenv.Topic(t, "in"), testenv.Topic(t, "g")
	createTopic(t, b.Seeds, topic, 4, nil)
	log := &assignLog{}
	src, err := kafka.NewSource(kafka.SourceConfig{Seeds: b.Seeds, Topics: []string{topic}, Group: group,
		SessionTimeout: 10 * time.Second, Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := src.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if _, err := src.FetchUpTo(ctx, 1000); err != nil {
				return
			}
		}
	}()
	defer func() { cancel(); <-done; testenv.Close(t, context.Background(), src) }()
	waitFor(t, time.Minute, "the first member's partitions", func() bool { return assignedCount(src.Group()) == 4 })
	// A second member takes half: the first's cooperative rebalances
	// assign it nothing new.
	c := join(t, b.Seeds, topic, group, 10*time.Second)
	waitFor(t, time.Minute, "the second member's partitions", func() bool { return assignedCount(c.src.Group()) == 2 })
	// The first member's last line comes with its last callback, which
	// may follow the second member's assignment a little.
	var gens []int64
	var maps []string
	status := func() int32 { return src.Group().Generation }
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		gens, maps = log.lines()
		if len(gens) >= 2 && gens[len(gens)-1] == int64(status()) {
			break
		}
	}
	t.Logf("first member's lines: generations %v, partitions %v; status generation %d", gens, maps, status())
	if len(gens) < 2 {
		t.Fatalf("%d partitions assigned lines after the second member joined, want 2 or more", len(gens))
	}
	for i := 1; i < len(gens); i++ {
		if gens[i] <= gens[i-1] {
			t.Errorf("line %d (partitions %s) names generation %d, line %d named %d", i, maps[i], gens[i], i-1, gens[i-1])
		}
	}
	if last := gens[len(gens)-1]; last != int64(status()) {
		t.Errorf("the last line names generation %d, the status %d", last, status())
	}
}
