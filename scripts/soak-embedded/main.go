// Command soak-embedded is the embedded broker's soak, run by hand (not in
// CI; docs/reliability.md has its figures). It runs `streamd run` as its own
// process in the quickstart's shape on its embedded broker with a short
// retention: a generator pipeline writing orders at -rate records/s into
// "orders"; the Go Wasm downgrade from "orders" into "orders.v1" with its
// dead letters in "orders.dlq" (this command writes 1% more records to
// "orders" that the plugin rejects); and an exactly-once copy of
// "orders.v1" into "orders.v1.copy". Every 2 minutes it reloads the config
// (SIGHUP) and reads the console's broker page. Every -every it samples the
// daemon's /metrics and the machine's load into samples.csv: RSS, Go heap
// in use, open files, goroutines, the broker's disk, index estimate,
// segment files and retained records, records in and out, consumer lag, and
// what retention deleted and what it deleted unread.
//
// At the end it stops the daemon (SIGTERM), fits a line to each series
// over the samples after the retention window (-settle, default two
// retentions), writes the slopes per hour to summary.json and prints them
// as a Markdown table. scripts/soak-plot.py draws the PNG.
//
// Usage (from the repository root; STREAMD_KAFKA_PORT picks the broker's
// port, default 9092):
//
//	go run ./scripts/soak-embedded [-duration 30m] [-rate 2000] [-retention 5m] [-out bin/soak-embedded]
//	python3 scripts/soak-plot.py bin/soak-embedded docs/soak-embedded.png
package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	duration := flag.Duration("duration", 30*time.Minute, "how long to run")
	rate := flag.Float64("rate", 2000, "records/s of the generator")
	retention := flag.Duration("retention", 5*time.Minute, "the embedded broker's retention")
	check := flag.Duration("check", 10*time.Second, "its retention check interval")
	segment := flag.Int64("segment-bytes", 1<<20, "its segment size (small, so that even the dead-letter topic rolls within the soak)")
	every := flag.Duration("every", 15*time.Second, "sampling interval")
	settle := flag.Duration("settle", 0, "samples before this are left out of the slopes (default: two retentions)")
	out := flag.String("out", "bin/soak-embedded", "output directory (emptied first)")
	flag.Parse()
	if *settle == 0 {
		*settle = 2 * *retention
	}
	s := &soak{duration: *duration, rate: *rate, retention: *retention, check: *check, segment: *segment, every: *every,
		settle: *settle, out: *out}
	if err := s.run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak-embedded:", err)
		os.Exit(1)
	}
}

type soak struct {
	duration, retention, check, every, settle time.Duration
	rate                                      float64
	segment                                   int64
	out                                       string

	admin, kafka string
}

// columns of samples.csv, after t (seconds since start) and load1.
var columns = []string{"rss_bytes", "heap_inuse_bytes", "heap_alloc_bytes", "heap_goal_bytes", "open_fds", "goroutines", "disk_bytes",
	"index_bytes", "segments", "retained_records", "in_orders", "out_orders", "dlq_orders", "out_copy", "lag_orders",
	"deleted_records", "skipped_unread", "source_skipped"}

func (s *soak) run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.RemoveAll(s.out); err != nil {
		return err
	}
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(s.out, "streamd")
	fmt.Println("building bin and the orders-downgrade plugin")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/streamd").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command("bash", "examples/wasm/go/orders-downgrade/build.sh").CombinedOutput(); err != nil {
		return fmt.Errorf("plugin build: %v\n%s", err, out)
	}
	plugin, err := filepath.Abs("examples/wasm/go/orders-downgrade/plugin.wasm")
	if err != nil {
		return err
	}
	port := os.Getenv("STREAMD_KAFKA_PORT")
	if port == "" {
		port = "9092"
	}
	s.kafka = "127.0.0.1:" + port
	if s.admin, err = freeAddr(); err != nil {
		return err
	}
	data, err := filepath.Abs(filepath.Join(s.out, "data"))
	if err != nil {
		return err
	}
	cfg := filepath.Join(s.out, "streamd.toml")
	if err := os.WriteFile(cfg, []byte(s.config(data, plugin)), 0o644); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(s.out, "streamd.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }() // the daemon's log: read by people, written by it
	d := exec.Command(bin, "run", "-c", cfg)
	d.Stdout, d.Stderr = logf, logf
	if err := d.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	defer func() {
		if d.ProcessState == nil {
			_ = d.Process.Kill()
		}
	}()
	fmt.Printf("streamd run (pid %d): admin %s, broker %s, log %s\n", d.Process.Pid, s.admin, s.kafka, logf.Name())
	if err := s.waitReady(ctx, exited); err != nil {
		return err
	}
	// The 1% the downgrade rejects.
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.kafka), kgo.DefaultProduceTopic("orders"), kgo.ProducerLinger(50*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	go feedBad(feedCtx, cl, s.rate/100)

	f, err := os.Create(filepath.Join(s.out, "samples.csv"))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // flushed after every row
	w := csv.NewWriter(f)
	_ = w.Write(append([]string{"t", "load1"}, columns...))
	start := time.Now()
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	reload := time.NewTicker(2 * time.Minute)
	defer reload.Stop()
	var rows [][]float64
	fmt.Printf("soaking for %v at %.0f records/s, retention %v (slopes from %v on); Ctrl-C ends it early\n", s.duration, s.rate, s.retention, s.settle)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-exited:
			return fmt.Errorf("streamd exited: %v (log %s)", err, logf.Name())
		case <-reload.C:
			_ = d.Process.Signal(syscall.SIGHUP)
			if _, err := get("http://" + s.admin + "/ui/api/broker"); err != nil {
				fmt.Println("console broker page:", err)
			}
		case now := <-tick.C:
			row, err := s.sample(now.Sub(start))
			if err != nil {
				fmt.Println("sample:", err)
				continue
			}
			rows = append(rows, row)
			rec := make([]string, len(row))
			for i, v := range row {
				rec[i] = strconv.FormatFloat(v, 'f', -1, 64)
			}
			_ = w.Write(rec)
			w.Flush()
			fmt.Printf("t=%4.0fs load %.1f rss %.0f MiB heap %.0f MiB fds %.0f disk %.0f MiB index %.1f MiB in %.0f out %.0f lag %.0f unread-deleted %.0f\n",
				row[0], row[1], row[2]/(1<<20), row[3]/(1<<20), row[6], row[8]/(1<<20), row[9]/(1<<20), row[12], row[13], row[16], row[18])
			if now.Sub(start) >= s.duration {
				break loop
			}
		}
	}
	stopFeed()
	_ = d.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			fmt.Println("streamd exit:", err)
		}
	case <-time.After(90 * time.Second):
		_ = d.Process.Kill()
		return errors.New("streamd did not exit within 90 s of SIGTERM")
	}
	return s.summarize(rows, logf.Name())
}

func (s *soak) config(data, plugin string) string {
	return fmt.Sprintf(`# The embedded broker's soak (scripts/soak-embedded): the quickstart's shape.
data_dir = %q
[admin]
listen = %q
[log]
level = "info"
[kafka.embedded]
listen = %q
retention = %q
retention_check_interval = %q
segment_bytes = %d
[kafka]
partitions = 4

[[pipeline]]
name = "generate-orders"
[pipeline.source]
type = "generate"
rate = %g
keys = 1000
[pipeline.sink]
type = "kafka"
topic = "orders"
compression = "zstd"

[[pipeline]]
name = "orders"
[pipeline.source]
type = "kafka"
topics = ["orders"]
group = "orders-v1"
[[pipeline.transform]]
type = "wasm"
path = %q
[pipeline.sink]
type = "kafka"
topic = "orders.v1"
compression = "zstd"
[pipeline.errors]
policy = "dlq"
dlq_topic = "orders.dlq"

[[pipeline]]
name = "copy"
delivery = "exactly-once"
[pipeline.source]
type = "kafka"
topics = ["orders.v1"]
group = "copy"
[pipeline.sink]
type = "kafka"
topic = "orders.v1.copy"
compression = "zstd"
`, data, s.admin, s.kafka, s.retention.String(), s.check.String(), s.segment, s.rate, plugin)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

func get(url string) (string, error) {
	c := http.Client{Timeout: 10 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer func() { _ = res.Body.Close() }() // read to the end below
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return string(b), nil
}

func (s *soak) waitReady(ctx context.Context, exited chan error) error {
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			return fmt.Errorf("streamd exited at start: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := get("http://" + s.admin + "/readyz"); err == nil {
			return nil
		}
	}
	return errors.New("streamd not ready within 3 minutes")
}

// feedBad writes perSec records a second that the downgrade rejects.
func feedBad(ctx context.Context, cl *kgo.Client, perSec float64) {
	t := time.NewTicker(time.Duration(float64(time.Second) / perSec))
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			cl.Produce(ctx, &kgo.Record{Key: []byte("bad"), Value: []byte("not an order " + strconv.Itoa(n))}, nil)
		}
	}
}

// sample reads /metrics and the load average into a row of samples.csv.
func (s *soak) sample(since time.Duration) ([]float64, error) {
	body, err := get("http://" + s.admin + "/metrics")
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	sum := func(k string, v float64) { m[k] += v }
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		series := line[:i]
		name, labels, _ := strings.Cut(series, "{")
		switch name {
		case "process_resident_memory_bytes":
			m["rss_bytes"] = v
		case "go_memstats_heap_inuse_bytes":
			m["heap_inuse_bytes"] = v
		case "go_memstats_heap_alloc_bytes":
			m["heap_alloc_bytes"] = v
		case "go_memstats_next_gc_bytes":
			// The collector's goal: twice the heap live after the
			// last collection (GOGC=100), a steadier sign of what is
			// live than the heap in use, which saws between them.
			m["heap_goal_bytes"] = v
		case "process_open_fds":
			m["open_fds"] = v
		case "go_goroutines":
			m["goroutines"] = v
		case "streamd_embedded_disk_bytes":
			m["disk_bytes"] = v
		case "streamd_embedded_index_memory_bytes":
			m["index_bytes"] = v
		case "streamd_embedded_segments":
			m["segments"] = v
		case "streamd_embedded_log_end_offset":
			sum("retained_records", v)
		case "streamd_embedded_log_start_offset":
			sum("retained_records", -v)
		case "streamd_embedded_retention_deleted_records_total":
			sum("deleted_records", v)
		case "streamd_embedded_retention_skipped_records_total":
			sum("skipped_unread", v)
		case "streamd_source_records_skipped_total":
			sum("source_skipped", v)
		case "streamd_records_in_total":
			if strings.Contains(labels, `pipeline="orders"`) {
				m["in_orders"] = v
			}
		case "streamd_records_out_total":
			switch {
			case strings.Contains(labels, `pipeline="orders"`):
				m["out_orders"] = v
			case strings.Contains(labels, `pipeline="copy"`):
				m["out_copy"] = v
			}
		case "streamd_records_dlq_total":
			if strings.Contains(labels, `pipeline="orders"`) {
				m["dlq_orders"] = v
			}
		case "streamd_consumer_lag":
			if strings.Contains(labels, `pipeline="orders"`) {
				sum("lag_orders", v)
			}
		}
	}
	load := 0.0
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load, _ = strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	}
	row := []float64{since.Seconds(), load}
	for _, c := range columns {
		row = append(row, m[c])
	}
	return row, nil
}

// slope is the least-squares slope of y over x.
func slope(x, y []float64) float64 {
	n := float64(len(x))
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		sxy += x[i] * y[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// summary is summary.json.
type summary struct {
	Duration     float64            `json:"duration_s"`
	Rate         float64            `json:"rate"`
	Retention    float64            `json:"retention_s"`
	Settle       float64            `json:"settle_s"`
	Samples      int                `json:"samples"`
	SlopesPerH   map[string]float64 `json:"slopes_per_hour"` // after settle
	Mean         map[string]float64 `json:"mean_after_settle"`
	First, Last  map[string]float64 `json:"-"`
	LoadMean     float64            `json:"load1_mean"`
	InPerSec     float64            `json:"orders_in_per_s"`
	DLQShare     float64            `json:"dlq_share"`
	Unread       float64            `json:"deleted_unread_records"`
	SourceSkip   float64            `json:"source_skipped_records"`
	Deleted      float64            `json:"deleted_records"`
	RetentionLog int                `json:"retention_skip_warnings"`
}

func (s *soak) summarize(rows [][]float64, logFile string) error {
	if len(rows) < 3 {
		return fmt.Errorf("only %d samples", len(rows))
	}
	sum := summary{Duration: rows[len(rows)-1][0], Rate: s.rate, Retention: s.retention.Seconds(), Settle: s.settle.Seconds(),
		Samples: len(rows), SlopesPerH: map[string]float64{}, Mean: map[string]float64{}}
	var x []float64
	var after [][]float64
	for _, r := range rows {
		sum.LoadMean += r[1] / float64(len(rows))
		if r[0] >= s.settle.Seconds() {
			x = append(x, r[0]/3600)
			after = append(after, r)
		}
	}
	if len(after) >= 3 {
		for i, c := range columns {
			y := make([]float64, len(after))
			for j, r := range after {
				y[j] = r[i+2]
				sum.Mean[c] += r[i+2] / float64(len(after))
			}
			sum.SlopesPerH[c] = slope(x, y)
		}
	}
	last := rows[len(rows)-1]
	col := func(name string) float64 {
		for i, c := range columns {
			if c == name {
				return last[i+2]
			}
		}
		return 0
	}
	sum.InPerSec = col("in_orders") / last[0]
	if in := col("in_orders"); in > 0 {
		sum.DLQShare = col("dlq_orders") / in
	}
	sum.Unread, sum.SourceSkip, sum.Deleted = col("skipped_unread"), col("source_skipped"), col("deleted_records")
	if b, err := os.ReadFile(logFile); err == nil {
		sum.RetentionLog = strings.Count(string(b), "retention deleted records a consumer group had not read")
	}
	b, _ := json.MarshalIndent(sum, "", "  ")
	if err := os.WriteFile(filepath.Join(s.out, "summary.json"), b, 0o644); err != nil {
		return err
	}
	fmt.Printf("\n%d samples over %.0f s; load average (1 min) mean %.1f; orders in %.0f/s, %.2f%% dead-lettered; retention deleted %.0f records, %.0f of them unread by a group (%d warnings), sources skipped %.0f\n\n",
		sum.Samples, sum.Duration, sum.LoadMean, sum.InPerSec, 100*sum.DLQShare, sum.Deleted, sum.Unread, sum.RetentionLog, sum.SourceSkip)
	fmt.Printf("| after %.0f min | mean | slope per hour |\n|---|---:|---:|\n", s.settle.Minutes())
	for _, c := range []string{"rss_bytes", "heap_inuse_bytes", "heap_goal_bytes", "disk_bytes", "index_bytes", "open_fds", "goroutines", "segments", "retained_records"} {
		mean, sl := sum.Mean[c], sum.SlopesPerH[c]
		if strings.HasSuffix(c, "_bytes") {
			fmt.Printf("| %s | %.1f MiB | %+.1f MiB/h |\n", c, mean/(1<<20), sl/(1<<20))
		} else {
			fmt.Printf("| %s | %.0f | %+.1f /h |\n", c, mean, sl)
		}
	}
	return nil
}
