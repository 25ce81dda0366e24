package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// cmdLatency measures the time from a record's send (the producer's clock,
// a header of the record) to its arrival at a reader of the output, with
// records produced at a steady rate, a fraction of the bare loop's
// saturated rate in this same setup (producer and reader running too).
func cmdLatency(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	var c common
	rows := c.flags(fs, "bare,streamd")
	fractions := fs.String("fractions", "0.1,0.5,0.8", "comma-separated fractions of the saturated rate")
	delivery := fs.String("delivery", "at-least-once", "comma-separated: at-least-once, exactly-once (the bare loop then runs a transaction per poll)")
	partitions := fs.Int("partitions", 4, "partitions of the input and output topics")
	size := fs.Int("size", 200, "value size in bytes")
	warmup := fs.Duration("warmup", 2*time.Second, "steady production before the measured window")
	window := fs.Duration("window", 8*time.Second, "the measured window: records sent in it count")
	satRate := fs.Float64("sat-rate", 0, "the saturated rate in records/s (0: measure it first, the bare loop with the producer unthrottled)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.bench == "" {
		c.bench = "latency"
	}
	fr := splitList(*fractions)
	b, err := c.setup(ctx, *rows)
	if err != nil {
		return err
	}
	defer b.close()
	fmt.Printf("latency: %s broker %v, work %s, load %v\n", b.kind, b.seeds, c.work, loadAvg())
	seq := 0
	sat := *satRate
	if sat == 0 {
		var rates []float64
		for i := 0; i < 2; i++ {
			seq++
			r, err := c.saturate(ctx, b, seq, *partitions, *size)
			if err != nil {
				return fmt.Errorf("saturated rate: %w", err)
			}
			fmt.Printf("  saturated rate of the bare loop, producer unthrottled: %.0f records/s (load %.1f)\n", r, loadAvg()[0])
			rates = append(rates, r)
		}
		sat = median(rates)
	}
	for round := 1; round <= c.rounds; round++ {
		for _, d := range splitList(*delivery) {
			for _, f := range fr {
				frac, err := strconv.ParseFloat(f, 64)
				if err != nil {
					return fmt.Errorf("-fractions %q: %w", f, err)
				}
				for _, row := range c.rows {
					seq++
					v := variant{row: row, parts: *partitions, size: *size, delivery: d}
					r, err := c.latencyOnce(ctx, b, v, seq, sat*frac, *warmup, *window)
					if err != nil {
						return fmt.Errorf("%s %s at %.0f%%: %w", row, d, 100*frac, err)
					}
					r.Round, r.SatRate, r.Fraction = round, sat, frac
					if err := c.write(r); err != nil {
						return err
					}
					fmt.Printf("  round %d %-14s %-13s %3.0f%% (%.0f/s, sent %.0f/s): p50 %.2f ms, p99 %.2f, p99.9 %.2f, max %.1f, missing %d, cpu %.1f%% (broker %.1f%%), load %.1f\n",
						round, row, d, 100*frac, r.Target, r.Sent, r.P50ms, r.P99ms, r.P999ms, r.MaxMs, r.Missing, 100*r.CPUS/r.Window, 100*r.BrkCPUS/r.Window, r.Load[0])
				}
			}
		}
	}
	return summarize(os.Stdout, []string{c.out}, c.bench)
}

// probe is the key of the records sent until the process under test is
// seen to move records; they are not measured.
var probeKey = []byte("benchuser-probe")

// rig is one latency run's topics and clients.
type rig struct {
	b            *broker
	in, out      string
	prod, reader *kgo.Client
}

func newRig(ctx context.Context, b *broker, seq, parts int, eos bool) (*rig, error) {
	r := &rig{b: b, in: fmt.Sprintf("lin-%d-%d", seq, time.Now().UnixNano()), out: fmt.Sprintf("lout-%d-%d", seq, time.Now().UnixNano())}
	if err := b.createTopics(ctx, parts, 0, r.in, r.out); err != nil {
		return nil, err
	}
	var err error
	if r.prod, err = kgo.NewClient(kgo.SeedBrokers(b.seeds...), kgo.DefaultProduceTopic(r.in), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(200000)); err != nil {
		return nil, err
	}
	ps := map[int32]kgo.Offset{}
	for p := 0; p < parts; p++ {
		ps[int32(p)] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.SeedBrokers(b.seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.out: ps})}
	if eos {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if r.reader, err = kgo.NewClient(opts...); err != nil {
		r.prod.Close()
		return nil, err
	}
	return r, nil
}

func (r *rig) close() {
	r.prod.Close()
	r.reader.Close()
	r.b.deleteTopics(context.Background(), r.in, r.out)
}

// waitMoving sends a probe record every 20 ms until one arrives at the
// output, or the process exits or a minute passes.
func (r *rig) waitMoving(ctx context.Context, p *proc) error {
	got := make(chan struct{})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for rctx.Err() == nil {
			fs := r.reader.PollFetches(rctx)
			if fs.NumRecords() > 0 {
				close(got)
				return
			}
		}
	}()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(time.Minute)
	for {
		select {
		case <-got:
			return nil
		case <-t.C:
			_, v := orderValue(0, 1, 200) // valid for a downgrade stage
			r.prod.Produce(ctx, &kgo.Record{Key: probeKey, Value: v}, nil)
			if done, err := p.exited(); done {
				return fmt.Errorf("exited (%v); log:\n%s", err, p.tail(3000))
			}
		case <-deadline:
			return fmt.Errorf("no record through after a minute; log:\n%s", p.tail(3000))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// saturate runs the bare loop with the producer unthrottled and returns
// the rate at which records arrive at the reader, from the fourth second
// to the tenth.
func (c *common) saturate(ctx context.Context, b *broker, seq, parts, size int) (float64, error) {
	rg, err := newRig(ctx, b, seq, parts, false)
	if err != nil {
		return 0, err
	}
	defer rg.close()
	dir := filepath.Join(c.work, fmt.Sprintf("run-%d", seq))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	v := variant{row: "bare", parts: parts, size: size, delivery: "at-least-once"}
	name, args, err := c.command(dir, b, v, []string{rg.in}, rg.out, fmt.Sprintf("lg-%d", seq), 1)
	if err != nil {
		return 0, err
	}
	p, err := startProc(filepath.Join(dir, "process.log"), nil, name, args...)
	if err != nil {
		return 0, err
	}
	defer p.stop(30 * time.Second)
	if err := rg.waitMoving(ctx, p); err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for i := int64(0); rctx.Err() == nil; i++ {
			k, val := orderValue(i, 1000, size)
			rg.prod.Produce(rctx, &kgo.Record{Key: k, Value: val}, nil) // blocks while MaxBufferedRecords are buffered
		}
	}()
	var n atomic.Int64
	go func() {
		for rctx.Err() == nil {
			n.Add(int64(rg.reader.PollFetches(rctx).NumRecords()))
		}
	}()
	if err := sleep(ctx, 4*time.Second); err != nil {
		return 0, err
	}
	n0, t0 := n.Load(), time.Now()
	if err := sleep(ctx, 6*time.Second); err != nil {
		return 0, err
	}
	return float64(n.Load()-n0) / time.Since(t0).Seconds(), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// latencyOnce runs one row at rate records/s.
func (c *common) latencyOnce(ctx context.Context, b *broker, v variant, seq int, rate float64, warmup, window time.Duration) (result, error) {
	res := result{Bench: c.bench, Broker: b.kind, Row: v.row, Size: v.size, Partitions: v.parts, Delivery: v.delivery,
		Load: loadAvg(), At: time.Now().UTC().Format(time.RFC3339), Target: rate}
	rg, err := newRig(ctx, b, seq, v.parts, v.delivery == "exactly-once")
	if err != nil {
		return res, err
	}
	defer rg.close()
	dir := filepath.Join(c.work, fmt.Sprintf("run-%d", seq))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	name, args, err := c.command(dir, b, v, []string{rg.in}, rg.out, fmt.Sprintf("lg-%d", seq), 1)
	if err != nil {
		return res, err
	}
	p, err := startProc(filepath.Join(dir, "process.log"), nil, name, args...)
	if err != nil {
		return res, err
	}
	defer p.stop(30 * time.Second)
	if err := rg.waitMoving(ctx, p); err != nil {
		return res, err
	}

	// The reader: arrival time minus send time of each record.
	var (
		mu       sync.Mutex
		lat      []time.Duration // of records sent in the window
		from, to int64           // the window in Unix ns (wall clock, as the stamps), set before the first such record is sent
		windowMu sync.RWMutex
	)
	rctx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	readerDone := make(chan error, 1)
	go func() {
		var err error
		for rctx.Err() == nil {
			fs := rg.reader.PollFetches(rctx)
			now := time.Now()
			windowMu.RLock()
			f, t := from, to
			windowMu.RUnlock()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				sent, e := sentAt(r)
				if e != nil {
					err = e
					return
				}
				if ns := sent.UnixNano(); f != 0 && ns >= f && ns < t {
					lat = append(lat, now.Sub(sent))
				}
			})
			mu.Unlock()
		}
		readerDone <- err
	}()

	// The producer: records at rate, paced every millisecond.
	cpu0, _ := procCPU(p.pid())
	brk0, _ := procCPU(b.pid)
	start := time.Now()
	end := start.Add(warmup + window)
	windowMu.Lock()
	from, to = start.Add(warmup).UnixNano(), end.UnixNano()
	windowMu.Unlock()
	var sentInWindow int64
	var failed atomic.Value
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Store(err)
		}
	}
	tick := time.NewTicker(time.Millisecond)
	var i int64
	for now := start; now.Before(end); now = <-tick.C {
		due := int64(rate * now.Sub(start).Seconds())
		for ; i < due; i++ {
			k, val := orderValue(i, 1000, v.size)
			t := time.Now()
			rg.prod.Produce(ctx, &kgo.Record{Key: k, Value: val, Headers: []kgo.RecordHeader{{Key: stampHeader, Value: stamp(t)}}}, promise)
			if ns := t.UnixNano(); ns >= from && ns < to {
				sentInWindow++
			}
		}
		if ctx.Err() != nil {
			tick.Stop()
			return res, ctx.Err()
		}
	}
	tick.Stop()
	cpu1, _ := procCPU(p.pid())
	brk1, _ := procCPU(b.pid)
	res.Window = time.Since(start).Seconds()
	res.CPUS, res.BrkCPUS = (cpu1 - cpu0).Seconds(), (brk1 - brk0).Seconds()
	res.Sent = float64(sentInWindow) / window.Seconds()
	if err := rg.prod.Flush(ctx); err != nil {
		return res, err
	}
	if err, _ := failed.Load().(error); err != nil {
		return res, err
	}
	// Wait for the window's records, at most 10 s more.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if int64(n) >= sentInWindow {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.PeakRSS = procStatus(p.pid(), "VmHWM")
	stopReader()
	if err := <-readerDone; err != nil {
		return res, err
	}
	mu.Lock()
	defer mu.Unlock()
	res.Got = len(lat)
	res.Missing = int(sentInWindow) - len(lat)
	if res.Missing < 0 {
		// More arrived than were sent: duplicates (the process's, or a
		// producer retry's); counted, and the quantiles taken of what
		// arrived.
		res.Dups, res.Missing = -res.Missing, 0
		sentInWindow = int64(len(lat))
	}
	if len(lat) == 0 {
		return res, errors.New("no record of the window arrived")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	// Records that never arrived count as later than any that did: a
	// quantile that falls on them is -1 (never).
	q := func(p float64) float64 {
		k := int(math.Ceil(p*float64(sentInWindow))) - 1
		if k >= len(lat) {
			return -1
		}
		return float64(lat[max(0, k)]) / 1e6
	}
	res.P50ms, res.P90ms, res.P99ms, res.P999ms = q(0.5), q(0.9), q(0.99), q(0.999)
	res.MaxMs = float64(lat[len(lat)-1]) / 1e6
	return res, nil
}
