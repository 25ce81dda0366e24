package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// cmdIdle measures what idle pipelines cost: a daemon of N kafka -> kafka
// pipelines, each on its own empty 4-partition topic, group and output
// topic, nothing produced; after it is ready and has settled, its CPU over
// a window and its resident set at the end. The bare row is N bare loops
// in one process on the same topics.
func cmdIdle(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	var c common
	rows := c.flags(fs, "bare,streamd")
	counts := fs.String("pipelines", "1,10,50,100,200", "comma-separated pipelines per daemon")
	partitions := fs.Int("partitions", 4, "partitions of each input topic")
	settle := fs.Duration("settle", 10*time.Second, "wait after ready before measuring")
	window := fs.Duration("window", 30*time.Second, "the measured window")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.bench == "" {
		c.bench = "idle"
	}
	ns, err := intList(*counts)
	if err != nil {
		return err
	}
	b, err := c.setup(ctx, *rows)
	if err != nil {
		return err
	}
	defer b.close()
	fmt.Printf("idle: %s broker %v, work %s, load %v\n", b.kind, b.seeds, c.work, loadAvg())
	seq := 0
	for round := 1; round <= c.rounds; round++ {
		for _, n := range ns {
			for _, row := range c.rows {
				seq++
				r, err := c.idleOnce(ctx, b, row, seq, n, *partitions, *settle, *window)
				if err != nil {
					return fmt.Errorf("%s with %d: %w", row, n, err)
				}
				r.Round = round
				if err := c.write(r); err != nil {
					return err
				}
				fmt.Printf("  round %d %-14s %3d pipelines: rss %s (%.2f MiB each), cpu %.2f%% of a core (%.3f%% each), broker %.2f%%, load %.1f\n",
					round, row, n, mib(r.RSS), float64(r.RSS)/(1<<20)/float64(n), 100*r.CPUS/r.Window, 100*r.CPUS/r.Window/float64(n), 100*r.BrkCPUS/r.Window, r.Load[0])
			}
		}
	}
	return summarize(os.Stdout, []string{c.out}, c.bench)
}

func (c *common) idleOnce(ctx context.Context, b *broker, row string, seq, n, parts int, settle, window time.Duration) (result, error) {
	r := result{Bench: c.bench, Broker: b.kind, Row: row, Partitions: parts, Pipelines: n, Delivery: "at-least-once",
		Load: loadAvg(), At: time.Now().UTC().Format(time.RFC3339)}
	in, out, group := fmt.Sprintf("iin-%d", seq), fmt.Sprintf("iout-%d", seq), fmt.Sprintf("ig-%d", seq)
	var ins, all []string
	for i := 0; i < n; i++ {
		ins = append(ins, fmt.Sprintf("%s-%d", in, i))
		all = append(all, fmt.Sprintf("%s-%d", in, i), fmt.Sprintf("%s-%d", out, i))
	}
	if n == 1 && row == "bare" {
		all = []string{in, out}
		ins = []string{in}
	}
	for i := 0; i < len(all); i += 100 {
		if err := b.createTopics(ctx, parts, 0, all[i:min(len(all), i+100)]...); err != nil {
			return r, err
		}
	}
	defer func() {
		for i := 0; i < len(all); i += 100 {
			b.deleteTopics(context.WithoutCancel(ctx), all[i:min(len(all), i+100)]...)
		}
	}()
	dir := filepath.Join(c.work, fmt.Sprintf("run-%d", seq))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	v := variant{row: row, parts: parts, delivery: "at-least-once"}
	name, args, err := c.command(dir, b, v, ins, out, group, n)
	if row == "bare" && n == 1 {
		name, args, err = c.command(dir, b, v, []string{in}, out, group, 1)
	}
	if err != nil {
		return r, err
	}
	p, err := startProc(filepath.Join(dir, "process.log"), nil, name, args...)
	if err != nil {
		return r, err
	}
	defer p.stop(60 * time.Second)
	if row != "bare" {
		if err := c.waitReady(ctx, p); err != nil {
			return r, err
		}
	}
	if err := sleep(ctx, settle); err != nil {
		return r, err
	}
	if done, err := p.exited(); done {
		return r, fmt.Errorf("exited (%v); log:\n%s", err, p.tail(3000))
	}
	cpu0, _ := procCPU(p.pid())
	brk0, _ := procCPU(b.pid)
	t0 := time.Now()
	if err := sleep(ctx, window); err != nil {
		return r, err
	}
	cpu1, _ := procCPU(p.pid())
	brk1, _ := procCPU(b.pid)
	r.Window = time.Since(t0).Seconds()
	r.CPUS, r.BrkCPUS = (cpu1 - cpu0).Seconds(), (brk1 - brk0).Seconds()
	r.RSS, r.PeakRSS = procStatus(p.pid(), "VmRSS"), procStatus(p.pid(), "VmHWM")
	if done, err := p.exited(); done {
		return r, fmt.Errorf("exited (%v); log:\n%s", err, p.tail(3000))
	}
	_ = os.RemoveAll(dir)
	return r, nil
}

// waitReady polls streamd's /readyz until it answers 200 (every pipeline
// connected and its group joined), at most two minutes.
func (c *common) waitReady(ctx context.Context, p *proc) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", c.adminPort), nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if done, err := p.exited(); done {
			return fmt.Errorf("exited (%v); log:\n%s", err, p.tail(3000))
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("not ready after two minutes; log:\n%s", p.tail(3000))
}
