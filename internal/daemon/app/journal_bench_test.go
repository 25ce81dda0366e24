package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/journal"
)

// BenchmarkJournalReplicator measures the replicator end to end:
// events/s of the replicator pipeline (`[pipeline.sink] type = "journal"`
// after a kafka source), built from TOML as `streamd run` builds it, from a
// 4-partition journal topic filled before the timer starts (Appends of 10
// or 1 events over 1,000 journals, ~90-byte JSON payloads, written with
// journal.Append) into the SQLite store. Each op is one event; the op ends
// when the replicator has written them all. events/s and cpu-us/event
// leave out the pipeline's start (the first tenth of the events); the CPU
// is the whole process's, kfake broker included (or not, with
// STREAMD_BENCH_BROKERS).
//
//	go test ./internal/daemon/app -run '^$' -bench JournalReplicator -benchtime 300000x
func BenchmarkJournalReplicator(b *testing.B) {
	for _, per := range []int{10, 1} {
		b.Run(fmt.Sprintf("store=sqlite/events-per-append=%d", per), func(b *testing.B) {
			seeds, topic := benchBrokers(b)
			adm := kadm.NewClient(newClient(b, seeds))
			if _, err := adm.CreateTopics(context.Background(), 4, 1, nil, topic); err != nil {
				b.Fatal(err)
			}
			dsn := "sqlite:" + filepath.Join(b.TempDir(), "journal.db")
			// b.N rounded up to whole Appends (testing's first run has b.N = 1).
			total := per * max(1, (b.N+per-1)/per)
			fillJournals(b, seeds, dsn, topic, 1000, total/per, per)
			a, err := app.Build(context.Background(), journalBenchConfig(b, seeds, dsn, topic), slog.New(slog.NewTextHandler(io.Discard, nil)), benchOpen, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			defer testenv.Close(b, context.Background(), a)
			b.ResetTimer()
			moved, took, cpu := runUntil(b, a, int64(total), 5*time.Millisecond, func(context.Context) (int64, error) {
				n, err := gatherSum(a, "streamd_journal_replicator_events_total")
				return int64(n), err
			})
			b.StopTimer()
			b.ReportMetric(float64(moved)/took.Seconds(), "events/s")
			b.ReportMetric(float64(cpu)/1000/float64(moved), "cpu-us/event")
			if n := metricSum(b, a, "streamd_batch_duration_seconds"); n > 0 {
				b.ReportMetric(float64(total/per)/n, "records/batch")
			}
		})
	}
}

// fillJournals makes appends Appends of per events to journals journals
// of topic, through journal.Append from 20 writers (each owns
// its journals, so their seqNrs increase).
func fillJournals(b *testing.B, seeds []string, dsn, topic string, journals, appends, per int) {
	ctx := context.Background()
	st, err := journal.OpenStore(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer testenv.Close(b, context.Background(), st)
	cl := newClient(b, seeds, kgo.ProducerLinger(time.Millisecond))
	j := journal.New(cl, st)
	defer testenv.Close(b, context.Background(), j)
	const writers = 20 // journals is a multiple
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := map[int]int64{}
			evs := make([]journal.Event, per)
			count := appends / writers
			if w < appends%writers {
				count++
			}
			for i := 0; i < count; i++ {
				k := w + writers*(i%(journals/writers)) // writer w owns k ≡ w (mod writers)
				for e := range evs {
					next[k]++
					evs[e] = journal.Event{SeqNr: next[k], PayloadType: journal.PayloadJSON, Tags: []string{"order"},
						Payload: fmt.Appendf(nil, `{"order":"o-%d","seq":%d,"amount":12.5,"currency":"EUR","items":["sku-1","sku-2"]}`, k, next[k])}
				}
				if _, err := j.Append(ctx, journal.Key{Topic: topic, ID: fmt.Sprintf("journal-%04d", k)}, evs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

func journalBenchConfig(b *testing.B, seeds []string, dsn, topic string) *config.Config {
	src := fmt.Sprintf(`
data_dir = %q
[kafka]
brokers = [%q]
[journal]
store = %q
[[pipeline]]
name = "replicate"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
start = "earliest"
[pipeline.sink]
type = "journal"
`, b.TempDir(), strings.Join(seeds, `","`), dsn, topic, topic+"-replicator")
	cfg, err := config.Parse("bench.toml", []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}
