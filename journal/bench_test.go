package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/record"
)

// appendRecords makes n Append records of eventsPer events each, spread
// over keys journals, on one partition, as the replicator receives them.
func appendRecords(topic string, keys, n, eventsPer int) []record.Record {
	next := make([]int64, keys)
	out := make([]record.Record, n)
	for i := range out {
		k := i % keys
		ev := &action.Events{}
		for j := 0; j < eventsPer; j++ {
			next[k]++
			ev.Events = append(ev.Events, action.Event{SeqNr: next[k], Tags: []string{"order"}, Kind: action.PayloadJSON,
				Payload: []byte(fmt.Sprintf(`{"order":"o-%d","seq":%d,"amount":12.5,"currency":"EUR","items":["sku-1","sku-2"]}`, k, next[k]))})
		}
		v, f, _ := action.EncodePayload(ev)
		h, _ := action.EncodeHeader(action.Header{Kind: action.KindAppend, From: next[k] - int64(eventsPer) + 1, To: next[k], PayloadType: f, Origin: "bench"})
		out[i] = record.Record{Topic: topic, Partition: 0, Offset: int64(i), Key: []byte(fmt.Sprintf("journal-%04d", k)), Value: v,
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)), Headers: []record.Header{{Key: action.HeaderKey, Value: h}}}
	}
	return out
}

// BenchmarkReplicate measures the Replicator sink alone: Write batches of
// 256 or 1,024 records (the pipeline's batch.max_records default) of one
// partition, 1 or 10 events per Append, 1,000 journals; events/s is the
// figure docs/benchmarks.md reports.
func BenchmarkReplicate(b *testing.B) {
	stores := map[string]func(b *testing.B) *Store{
		"sqlite": func(b *testing.B) *Store {
			s, err := OpenStore(context.Background(), "sqlite:"+filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"postgres": func(b *testing.B) *Store {
			dsn := os.Getenv("STREAMD_TEST_POSTGRES_DSN")
			if dsn == "" {
				testenv.Missing(b, "PostgreSQL (STREAMD_TEST_POSTGRES_DSN)")
			}
			s, err := OpenStore(context.Background(), dsn)
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		for _, batch := range []int{256, 1024} {
			for _, per := range []int{1, 10} {
				benchReplicate(b, name, stores[name], batch, per)
			}
		}
	}
}

func benchReplicate(b *testing.B, name string, open func(b *testing.B) *Store, batch, per int) {
	b.Run(fmt.Sprintf("%s/batch=%d/events-per-append=%d", name, batch, per), func(b *testing.B) {
		st := open(b)
		defer testenv.Close(b, context.Background(), st)
		rep, _ := NewReplicator(st)
		topic := fmt.Sprintf("bench-%d", time.Now().UnixNano())
		recs := appendRecords(topic, 1000, b.N*batch, per)
		ctx := context.Background()
		cpu0 := cpuTime()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := rep.Write(ctx, recs[i*batch:(i+1)*batch]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		events := float64(b.N * batch * per)
		b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
		// CPU time of this process per event: on a shared machine the
		// wall-clock rate understates what a dedicated core does.
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/events, "cpu-us/event")
	})
}

// BenchmarkRead measures Journal.Read of a 1,000-event journal (10
// appends of 100) with a replicator that has everything, and with the last
// 100 events only in Kafka; p50-ms and p99-ms are per read. The
// interleaved case writes the journal one event per Append while 99 other
// journals are written at the same time, so that in the store its events
// sit between theirs.
func BenchmarkRead(b *testing.B) {
	for _, tc := range []struct {
		name        string
		unrepl      int // events left unreplicated
		cache       bool
		interleaved bool
	}{
		{"store-complete/head-cache", 0, true, false},
		{"store-complete/no-cache", 0, false, false},
		{"100-in-kafka/head-cache", 100, true, false},
		{"100-in-kafka/no-cache", 100, false, false},
		{"store-complete/interleaved/head-cache", 0, true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var opts []Option
			if !tc.cache {
				opts = append(opts, WithoutHeadCache())
			}
			h := newHarness(b, 1, opts...)
			key := Key{Topic: h.topic, ID: "bench"}
			for i := 0; i < 10 && !tc.interleaved; i++ {
				evs := make([]Event, 100)
				for j := range evs {
					s := int64(i*100 + j + 1)
					evs[j] = Event{SeqNr: s, PayloadType: PayloadJSON, Payload: []byte(fmt.Sprintf(`{"n":%d,"pad":"0123456789012345678901234567890123456789"}`, s))}
				}
				if i == 10-tc.unrepl/100 {
					h.sync(0)
				}
				if _, err := h.j.Append(h.ctx, key, evs); err != nil {
					b.Fatal(err)
				}
			}
			if tc.interleaved {
				fillInterleaved(b, h, key)
			}
			if tc.unrepl == 0 {
				h.sync(0)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				n := 0
				if _, err := h.j.Read(h.ctx, key, 1, func(Event) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if n != 1000 {
					b.Fatalf("read %d events", n)
				}
				// Keep the store as it was: a current replicator also applies the
				// Marks of reads; the lagging one stays stopped.
				if tc.unrepl == 0 {
					b.StopTimer()
					h.sync(0)
					b.StartTimer()
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// fillInterleaved appends 1,000 events to key one per Append, while 99
// other journals of the topic get as many at the same time, and
// replicates all of it.
func fillInterleaved(b *testing.B, h *harness, key Key) {
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for j := 0; j < 100; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := key
			if j > 0 {
				k.ID = fmt.Sprintf("other-%02d", j)
			}
			for s := int64(1); s <= 1000; s++ {
				ev := []Event{{SeqNr: s, PayloadType: PayloadJSON, Tags: []string{"order"}, Payload: []byte(fmt.Sprintf(`{"n":%d,"pad":"0123456789012345678901234567890123456789"}`, s))}}
				if _, err := h.j.Append(h.ctx, k, ev); err != nil {
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
	recs := h.records(0, h.applied[0])
	for len(recs) > 0 { // in pipeline-sized batches
		n := min(1024, len(recs))
		if _, err := h.rep.Write(h.ctx, recs[:n]); err != nil {
			b.Fatal(err)
		}
		h.applied[0] = recs[n-1].Offset + 1
		recs = recs[n:]
	}
}

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppend measures Journal.Append of one ~80-byte event on kfake
// into a SQLite store with the head cache on: one writer appending to one
// journal (latency-bound: p50-ms per Append), and 20 writers over 1,000
// journals (appends/s). An Append reads the store's row
// before writing and learns its verdict from the partition after; the
// replicator is not running, so the verdict comes from the head cache.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 20} {
		b.Run(fmt.Sprintf("writers-%d", writers), func(b *testing.B) {
			h := newHarness(b, 1)
			journals := 1
			if writers > 1 {
				journals = 1000
			}
			var next atomic.Int64
			lat := make([][]time.Duration, writers)
			cpu0 := cpuTime()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					seq := map[int]int64{}
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						k := w + writers*(i/writers%max(1, journals/writers)) // writer w owns k ≡ w (mod writers)
						seq[k]++
						ev := []Event{{SeqNr: seq[k], PayloadType: PayloadJSON, Payload: []byte(fmt.Sprintf(`{"n":%d,"pad":"0123456789012345678901234567890123456789"}`, seq[k]))}}
						start := time.Now()
						if _, err := h.j.Append(h.ctx, Key{Topic: h.topic, ID: fmt.Sprintf("j-%04d", k)}, ev); err != nil {
							errs <- err
							return
						}
						lat[w] = append(lat[w], time.Since(start))
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			all := slices.Concat(lat...)
			slices.Sort(all)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/append")
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			if st := h.j.Stats(); st.Appends > 0 {
				b.ReportMetric(float64(st.CheckLocal)*100/float64(st.Appends), "local-%")
			}
		})
	}
}
