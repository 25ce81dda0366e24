package app_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// BenchmarkFirstRecord: the time from
// building a kafka -> orders-downgrade -> kafka pipeline from TOML (what
// `streamd run` does after reading its config: plugins compiled and
// loaded, clients made) to its first output record, with 1,000 orders
// already in the 4-partition input topic. Each op starts a pipeline twice
// on the same fresh kfake broker: first with an empty compilation cache
// (cold-ms: compile and fuel-instrument the module) and then again with
// the cache the first left (warm-ms), each time on topics and a group of
// its own. The group join and the first fetch are included; the Go
// process's own start (a few ms) is not.
//
//	go test ./internal/daemon/app -run '^$' -bench FirstRecord -benchtime 3x -count 3
func BenchmarkFirstRecord(b *testing.B) {
	for _, tc := range []struct{ name, transform string }{
		{"none", ""},
		{"wasm-c", "c"},
		{"wasm-rust", "rust"},
		{"wasm-assemblyscript", "assemblyscript"},
		{"wasm-go", "go"},
	} {
		path := ""
		if tc.transform != "" {
			if path = downgradePlugin(b, tc.transform); path == "-" {
				continue
			}
		}
		b.Run("transform="+tc.name, func(b *testing.B) {
			seeds, topic := benchBrokers(b)
			adm := kadm.NewClient(newClient(b, seeds))
			var cold, warm time.Duration
			for range b.N {
				cache := filepath.Join(b.TempDir(), "wasm-cache")
				cold += firstRecord(b, seeds, adm, topic+"-"+time.Now().Format("150405.000000000")+"-cold", cache, path)
				warm += firstRecord(b, seeds, adm, topic+"-"+time.Now().Format("150405.000000000")+"-warm", cache, path)
			}
			b.ReportMetric(cold.Seconds()*1000/float64(b.N), "cold-ms")
			b.ReportMetric(warm.Seconds()*1000/float64(b.N), "warm-ms")
		})
	}
}

// firstRecord fills topic-in with 1,000 orders (untimed), then times a
// pipeline topic-in -> plugin -> topic-out with its compilation cache in
// cache from app.Build to the first record in topic-out, and stops it.
func firstRecord(b *testing.B, seeds []string, adm *kadm.Client, topic, cache, plugin string) time.Duration {
	b.Helper()
	in, out := topic+"-in", topic+"-out"
	b.StopTimer()
	if _, err := adm.CreateTopics(context.Background(), 4, 1, nil, in, out); err != nil {
		b.Fatal(err)
	}
	fillOrders(b, seeds, in, 1000)
	cfg := benchConfig(b, seeds, in, out, plugin)
	cfg.Plugins.CacheDir = cache
	if err := os.MkdirAll(filepath.Dir(cache), 0o755); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.StartTimer()
	start := time.Now()
	a, err := app.Build(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), benchOpen, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var took time.Duration
	for took == 0 {
		ends, err := adm.ListEndOffsets(ctx, out)
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) {
				if o.Offset > 0 && took == 0 {
					took = time.Since(start)
				}
			})
		}
		if took == 0 {
			select {
			case err := <-done:
				b.Fatalf("pipeline ended before its first record: %v", err)
			case <-time.After(time.Millisecond):
			}
		}
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	testenv.Close(b, context.Background(), a)
	b.StartTimer()
	return took
}
