package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// membershipConfig is a kafka -> kafka pipeline without instance_id, with
// the default session timeout (45 s).
func membershipConfig(t *testing.T, b *testenv.Broker, in, out, group string) string {
	return writeConfig(t, brokersTOML(b)+fmt.Sprintf(`
[[pipeline]]
name = "pass"
commit_interval = "100ms"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[pipeline.sink]
type = "kafka"
topic = %q
`, in, group, out))
}

// TestRestartTakesPartitionsBack: a process killed with SIGKILL and
// started again, with the same config and no instance_id, gets its
// partitions back within seconds, not after the 45 s session timeout.
func TestRestartTakesPartitionsBack(t *testing.T) {
	b := testenv.Kafka(t)
	in, out, group := testenv.Topic(t, "in"), testenv.Topic(t, "out"), testenv.Topic(t, "g")
	b.CreateTopic(t, in, 4)
	b.CreateTopic(t, out, 4)
	cfg := membershipConfig(t, b, in, out, group)
	producer := b.Client(t)
	d := start(t, cfg)
	produce(t, producer, in, 0, 100)
	if seen, _ := consumeAll(t, b, out, 100, time.Minute); len(seen) != 100 {
		t.Fatalf("first run wrote %d of 100", len(seen))
	}
	d.kill(t)
	restart := time.Now()
	d = start(t, cfg)
	produce(t, producer, in, 100, 100)
	seen, _ := consumeAll(t, b, out, 200, time.Minute)
	took := time.Since(restart)
	t.Logf("after SIGKILL and restart: %d of 200 written %s after the restart", len(seen), took.Round(100*time.Millisecond))
	if len(seen) != 200 {
		t.Fatalf("%d of 200 written", len(seen))
	}
	if took > 15*time.Second {
		t.Fatalf("the restarted process took %s to take its partitions back (want seconds, not the session timeout)", took.Round(100*time.Millisecond))
	}
	d.stop(t)
}

// TestTwoProcessesShareGroup: two processes with the same config (and so
// the same data_dir) on one machine are two members of the group that
// share its partitions; when one gets SIGTERM, the other takes all of them
// within seconds and every record is written (the way to run several
// processes on one machine).
func TestTwoProcessesShareGroup(t *testing.T) {
	b := testenv.Kafka(t)
	in, out, group := testenv.Topic(t, "in"), testenv.Topic(t, "out"), testenv.Topic(t, "g")
	b.CreateTopic(t, in, 4)
	b.CreateTopic(t, out, 4)
	cfg := membershipConfig(t, b, in, out, group)
	d1 := start(t, cfg)
	d2 := start(t, cfg)
	adm := kadm.NewClient(b.Client(t))
	members := func() (n int, withParts int, ids []string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return 0, 0, nil
		}
		for _, m := range gs[group].Members {
			n++
			if a, ok := m.Assigned.AsConsumer(); ok && len(a.Topics) > 0 && len(a.Topics[0].Partitions) > 0 {
				withParts++
			}
			id := m.MemberID
			if m.InstanceID != nil {
				id = *m.InstanceID
			}
			ids = append(ids, id)
		}
		return n, withParts, ids
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		n, wp, ids := members()
		if n == 2 && wp == 2 {
			t.Logf("two members sharing the partitions: %v", ids)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: %d members, %d with partitions (%v)", group, n, wp, ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
	producer := b.Client(t)
	produce(t, producer, in, 0, 100)
	if seen, _ := consumeAll(t, b, out, 100, time.Minute); len(seen) != 100 {
		t.Fatalf("wrote %d of 100", len(seen))
	}
	d1.stop(t)
	stop := time.Now()
	produce(t, producer, in, 100, 100)
	seen, _ := consumeAll(t, b, out, 200, time.Minute)
	took := time.Since(stop)
	t.Logf("after SIGTERM of one: %d of 200 written %s later", len(seen), took.Round(100*time.Millisecond))
	if len(seen) != 200 {
		t.Fatalf("%d of 200 written", len(seen))
	}
	if took > 15*time.Second {
		t.Fatalf("the remaining process took %s to take the partitions over", took.Round(100*time.Millisecond))
	}
	d2.stop(t)
}
