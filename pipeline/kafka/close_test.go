package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv/faultproxy"
	"github.com/streamd/streamd/pipeline/kafka"
)

// TestCloseFrozenBroker: closing a source whose broker answers nothing
// (frozen: SIGSTOP, a partition that swallows traffic) returns by the
// context's deadline, for a static and a dynamic member with acknowledged
// records to commit on the revoke. The regression: after the leave timed out,
// franz-go's Close waited for the revoke's commit, run with the client's
// own context, until the broker woke (35 s with shutdown_timeout 5s; for
// good with a broker frozen for good). The leave that did not happen is
// reported: Close returns an error.
func TestCloseFrozenBroker(t *testing.T) {
	for _, tc := range []struct {
		name     string
		instance string
	}{{"static", "i-1"}, {"dynamic", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			_, px := proxiedKfake(t)
			seeds := []string{px.Addr()}
			createTopic(t, seeds, "in", 4, nil)
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			fillAt(t, cl, "in", 0, 400, time.Now())
			src, err := kafka.NewSource(kafka.SourceConfig{Seeds: seeds, Topics: []string{"in"}, Group: "g", InstanceID: tc.instance})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := src.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			read := 0
			for read < 100 {
				msgs, err := src.FetchUpTo(ctx, 50)
				if err != nil {
					t.Fatal(err)
				}
				src.Ack(msgs) // acknowledged, not committed: the revoke commits them
				read += len(msgs)
			}
			setProxy(t, px, faultproxy.Blackhole)
			time.Sleep(500 * time.Millisecond)
			const budget = time.Second
			cctx, ccancel := context.WithTimeout(context.Background(), budget)
			defer ccancel()
			start := time.Now()
			done := make(chan struct{})
			var closeErr error
			go func() {
				closeErr = src.Close(cctx)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				setProxy(t, px, faultproxy.Pass) // let it end
				<-done
				t.Fatalf("Close with a %v deadline returned only when the broker answered again, %s later", budget, time.Since(start).Round(time.Millisecond))
			}
			took := time.Since(start)
			t.Logf("Close returned after %s: %v", took.Round(time.Millisecond), closeErr)
			// A loaded machine may be a little late.
			if took > budget+500*time.Millisecond {
				t.Fatalf("Close took %s with a %v deadline", took.Round(time.Millisecond), budget)
			}
			if closeErr == nil {
				t.Error("Close returned nil though the broker answered nothing: the failed leave is not reported")
			}
			setProxy(t, px, faultproxy.Pass)
		})
	}
}
