package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// result is one run, one JSON line of -out.
type result struct {
	Bench      string     `json:"bench"`
	Broker     string     `json:"broker"`
	Row        string     `json:"row"`
	Round      int        `json:"round"`
	Records    int        `json:"records"`
	Size       int        `json:"size"`
	Partitions int        `json:"partitions"`
	Stages     int        `json:"stages,omitempty"`
	Delivery   string     `json:"delivery"`
	TxnRecords int        `json:"txn_records,omitempty"`
	Pipelines  int        `json:"pipelines,omitempty"`
	Load       [3]float64 `json:"load"`
	At         string     `json:"at"`

	// throughput: seconds from the process's start to the first output
	// record, to a tenth of them, and to all.
	FirstS  float64 `json:"first_s,omitempty"`
	TenthS  float64 `json:"tenth_s,omitempty"`
	AllS    float64 `json:"all_s,omitempty"`
	Rate    float64 `json:"rate,omitempty"`     // records/s from the process's start
	Steady  float64 `json:"steady,omitempty"`   // records/s from a tenth to all
	CPUS    float64 `json:"cpu_s"`              // the process's CPU until all were out
	PeakRSS int64   `json:"peak_rss"`           // the process's VmHWM then
	RSS     int64   `json:"rss,omitempty"`      // its VmRSS (idle)
	BrkCPUS float64 `json:"broker_cpu_s"`       // the broker's CPU over the same time
	BrkPeak int64   `json:"broker_peak_rss"`    // the broker's VmHWM since the run started
	Window  float64 `json:"window_s,omitempty"` // idle: the measured window
	// streamd's own account (its /metrics): batches acknowledged, their
	// mean time from processing start to acknowledgement.
	Batches     float64 `json:"batches,omitempty"`
	BatchMeanMs float64 `json:"batch_mean_ms,omitempty"`
	Txns        float64 `json:"txns,omitempty"` // exactly-once: transactions ended

	// latency
	Target   float64 `json:"target_rate,omitempty"` // records/s asked of the producer
	Sent     float64 `json:"sent_rate,omitempty"`   // records/s it produced in the window
	Got      int     `json:"got,omitempty"`         // window records that arrived
	Missing  int     `json:"missing,omitempty"`     // window records that did not, by the deadline
	Dups     int     `json:"dups,omitempty"`        // window records that arrived more than once
	P50ms    float64 `json:"p50_ms,omitempty"`
	P90ms    float64 `json:"p90_ms,omitempty"`
	P99ms    float64 `json:"p99_ms,omitempty"`
	P999ms   float64 `json:"p999_ms,omitempty"`
	MaxMs    float64 `json:"max_ms,omitempty"`
	SatRate  float64 `json:"sat_rate,omitempty"` // the bare loop's saturated rate the targets are fractions of
	Fraction float64 `json:"fraction,omitempty"`
}

// common are the flags every measuring command has.
type common struct {
	out, work, streamd, self   string
	brokerKind, brokers, addr  string
	brokerPid, adminPort       int
	adminBase                  int
	plugins                    pluginFlag
	variants                   variantFlag
	bins                       pluginFlag
	extra, sinkExtra, srcExtra string
	compression                string
	rows                       []string
	rounds                     int
	profile                    string
	bench                      string
}

type pluginFlag map[string]string

func (p pluginFlag) String() string { return fmt.Sprint(map[string]string(p)) }
func (p pluginFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("-plugin %q: want LABEL=PATH", s)
	}
	abs, err := filepath.Abs(v)
	if err != nil {
		return err
	}
	p[k] = abs
	return nil
}

func (c *common) flags(fs *flag.FlagSet, defRows string) *string {
	c.plugins = pluginFlag{}
	c.variants = variantFlag{}
	c.bins = pluginFlag{}
	fs.StringVar(&c.out, "out", "bin/bench-user/results.jsonl", "append results (JSON lines) here")
	fs.StringVar(&c.work, "work", "", "scratch dir (default: a new temp dir)")
	fs.StringVar(&c.streamd, "streamd", "bin/streamd", "the streamd binary")
	fs.StringVar(&c.brokerKind, "broker", "kfake", "kfake (a `streamd broker` process started here) or kafka (-brokers, -broker-pid)")
	fs.StringVar(&c.brokers, "brokers", "", "with -broker kafka: its address")
	fs.IntVar(&c.brokerPid, "broker-pid", 0, "with -broker kafka: its process id, for its CPU")
	fs.StringVar(&c.addr, "kfake-addr", "127.0.0.1:36110", "where the kfake broker listens")
	fs.IntVar(&c.adminBase, "admin-port", 36180, "streamd's admin listener port: the first free one of ADMIN-PORT .. ADMIN-PORT+19")
	fs.Var(c.plugins, "plugin", "LABEL=PATH: a Wasm plugin a row streamd+LABEL runs (repeatable); identity=PATH for -stages")
	fs.Var(c.bins, "bin", "NAME=PATH: another streamd binary, which a row ROW@NAME runs (builds side by side; repeatable)")
	fs.Var(c.variants, "variant", "NAME=KEY=VALUE;KEY=VALUE...: settings a row streamd:NAME (or streamd+LABEL:NAME) runs with; a KEY source.X, sink.X, batch.X or transaction.X goes to that table (repeatable)")
	fs.StringVar(&c.extra, "pipeline-toml", "", "TOML lines added to the [[pipeline]] table (a setting against the defaults)")
	fs.StringVar(&c.sinkExtra, "sink-toml", "", "TOML lines added to [pipeline.sink]")
	fs.StringVar(&c.srcExtra, "source-toml", "", "TOML lines added to [pipeline.source]")
	fs.StringVar(&c.compression, "compression", "snappy", "output compression of both")
	fs.IntVar(&c.rounds, "rounds", 3, "interleaved rounds")
	fs.StringVar(&c.profile, "profile", "", "DIR: from a streamd row's first output record, write a 1 s CPU profile and execution trace of it to DIR (go tool trace -pprof=sync ...)")
	fs.StringVar(&c.bench, "bench", "", "a label for the results (default: the command)")
	return fs.String("rows", defRows, "comma-separated rows: bare, streamd, streamd+LABEL (-plugin LABEL=PATH), streamd:NAME and streamd+LABEL:NAME (-variant NAME=...)")
}

func (c *common) setup(ctx context.Context, rows string) (*broker, error) {
	c.rows = splitList(rows)
	for _, r := range c.rows {
		if _, bin, ok := strings.Cut(r, "@"); ok && c.bins[bin] == "" {
			return nil, fmt.Errorf("row %q: no -bin %s=PATH", r, bin)
		}
		if r == "bare" {
			continue
		}
		label, name, err := c.parseRow(r)
		if err != nil {
			return nil, err
		}
		if label != "" && c.plugins[label] == "" {
			return nil, fmt.Errorf("row %q: no -plugin %s=PATH", r, label)
		}
		if name != "" && c.variants[name] == nil {
			return nil, fmt.Errorf("row %q: no -variant %s=SETTINGS", r, name)
		}
	}
	var err error
	if c.self, err = os.Executable(); err != nil {
		return nil, err
	}
	if c.streamd, err = filepath.Abs(c.streamd); err != nil {
		return nil, err
	}
	if c.work == "" {
		if c.work, err = os.MkdirTemp("", "benchuser-"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(c.out), 0o755); err != nil {
		return nil, err
	}
	switch c.brokerKind {
	case "kfake":
		return startKfake(ctx, c.streamd, c.addr, filepath.Join(c.work, "broker"))
	case "kafka":
		if c.brokers == "" {
			return nil, errors.New("-broker kafka needs -brokers")
		}
		return connect(ctx, "kafka", strings.Split(c.brokers, ","), c.brokerPid)
	}
	return nil, fmt.Errorf("-broker %q: want kfake or kafka", c.brokerKind)
}

func (c *common) write(r result) error {
	f, err := os.OpenFile(c.out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(r)
	_, err = f.Write(append(b, '\n'))
	return errors.Join(err, f.Close())
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// variant is what one run moves and how.
type variant struct {
	row                  string
	records, size, parts int
	stages, txn          int
	delivery             string
	in                   string
	maxMessageBytes      int
}

func cmdThroughput(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("throughput", flag.ContinueOnError)
	var c common
	rows := c.flags(fs, "bare,streamd")
	records := fs.String("records", "1000000", "comma-separated record counts")
	sizes := fs.String("sizes", "200", "comma-separated value sizes in bytes")
	partitions := fs.String("partitions", "4", "comma-separated partition counts of the input and output topics")
	stages := fs.String("stages", "0", "comma-separated counts of Wasm identity stages (-plugin identity=PATH) the streamd rows add")
	delivery := fs.String("delivery", "at-least-once", "comma-separated: at-least-once, exactly-once")
	txns := fs.String("txn-records", "0", "comma-separated exactly-once transaction sizes (0: the default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.bench == "" {
		c.bench = "throughput"
	}
	ns, err1 := intList(*records)
	ss, err2 := intList(*sizes)
	ps, err3 := intList(*partitions)
	sts, err4 := intList(*stages)
	tx, err5 := intList(*txns)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return err
	}
	b, err := c.setup(ctx, *rows)
	if err != nil {
		return err
	}
	defer b.close()
	fmt.Printf("throughput: %s broker %v, work %s, load %v\n", b.kind, b.seeds, c.work, loadAvg())
	seq := 0
	for _, n := range ns {
		for _, size := range ss {
			for _, parts := range ps {
				in := fmt.Sprintf("in-%d-%d-%d-%d", n, size, parts, time.Now().UnixNano())
				maxMsg := 0
				if size > 900_000 {
					maxMsg = 2 << 20
				}
				if err := b.createTopics(ctx, parts, maxMsg, in); err != nil {
					return err
				}
				t := time.Now()
				if err := b.fill(ctx, in, n, size, max(1000, 16*parts), max(1048588, maxMsg)); err != nil {
					return fmt.Errorf("fill %s: %w", in, err)
				}
				fmt.Printf("filled %s: %d records of %d B in %d partitions in %s\n", in, n, size, parts, time.Since(t).Round(time.Millisecond))
				var vs []variant
				for _, d := range splitList(*delivery) {
					for _, st := range sts {
						for _, txn := range tx {
							for _, row := range c.rows {
								if row == "bare" && (st != sts[0] || txn != tx[0]) {
									continue // the reference has no stages or transaction size
								}
								v := variant{row: row, records: n, size: size, parts: parts, stages: st, txn: txn, delivery: d, in: in, maxMessageBytes: maxMsg}
								if d != "exactly-once" {
									if txn != tx[0] {
										continue // no transactions
									}
									v.txn = 0
								}
								vs = append(vs, v)
							}
						}
					}
				}
				for round := 1; round <= c.rounds; round++ {
					for _, v := range vs {
						seq++
						r, err := c.runOnce(ctx, b, v, round, seq)
						if err != nil {
							return fmt.Errorf("%s round %d: %w", v.row, round, err)
						}
						if err := c.write(r); err != nil {
							return err
						}
						fmt.Printf("  round %d %-14s %-13s stages %d txn %d: %7.3f s, %9.0f rec/s from start, %9.0f steady, cpu %.2f µs/rec (broker %.2f), peak rss %s, load %.1f",
							round, v.row, v.delivery, v.stages, v.txn, r.AllS, r.Rate, r.Steady, r.CPUS*1e6/float64(n), r.BrkCPUS*1e6/float64(n), mib(r.PeakRSS), r.Load[0])
						if r.Batches > 0 {
							fmt.Printf(", %.0f records/batch, batch %.1f ms", float64(n)/r.Batches, r.BatchMeanMs)
						}
						if r.Txns > 0 {
							fmt.Printf(", %.0f records/transaction", float64(n)/r.Txns)
						}
						fmt.Println()
					}
				}
				b.deleteTopics(ctx, in)
			}
		}
	}
	return summarize(os.Stdout, []string{c.out}, c.bench)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// runOnce runs one variant: a fresh output topic and group, the process
// started, the output polled until it holds every record.
func (c *common) runOnce(ctx context.Context, b *broker, v variant, round, seq int) (result, error) {
	r, err := c.run(ctx, b, v, round, seq)
	if err == nil {
		_ = os.RemoveAll(filepath.Join(c.work, fmt.Sprintf("run-%d", seq))) // kept after a failure
	}
	return r, err
}

func (c *common) run(ctx context.Context, b *broker, v variant, round, seq int) (result, error) {
	out, group := fmt.Sprintf("out-%d-%d", seq, time.Now().UnixNano()), fmt.Sprintf("g-%d-%d", seq, time.Now().UnixNano())
	if err := b.createTopics(ctx, v.parts, v.maxMessageBytes, out); err != nil {
		return result{}, err
	}
	defer b.deleteTopics(context.WithoutCancel(ctx), out)
	// The new topic answers end-offset queries before the process starts:
	// on Apache Kafka its partitions' leaders come a moment after the
	// creation, and a query in that moment waits for a metadata refresh
	// (up to 5 s), which the timer below would charge to the row.
	if err := b.waitReady(ctx, out); err != nil {
		return result{}, err
	}
	r := result{Bench: c.bench, Broker: b.kind, Row: v.row, Round: round, Records: v.records, Size: v.size, Partitions: v.parts,
		Stages: v.stages, Delivery: v.delivery, TxnRecords: v.txn, Load: loadAvg(), At: time.Now().UTC().Format(time.RFC3339)}
	if v.row == "bare" {
		r.Stages, r.TxnRecords = 0, 0
	}
	dir := filepath.Join(c.work, fmt.Sprintf("run-%d", seq))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	name, args, err := c.command(dir, b, v, []string{v.in}, out, group, 1)
	if err != nil {
		return r, err
	}
	count := func(ctx context.Context) (int64, error) { return b.endSum(ctx, out) }
	if v.delivery == "exactly-once" {
		count = func(ctx context.Context) (int64, error) { return b.committedSum(ctx, group, v.in) }
	}
	every := 5 * time.Millisecond
	if v.parts > 16 {
		every = 25 * time.Millisecond
	}
	brk0, _ := procCPU(b.pid)
	if b.pid > 0 {
		resetPeakRSS(b.pid)
	}
	p, err := startProc(filepath.Join(dir, "process.log"), nil, name, args...)
	if err != nil {
		return r, err
	}
	defer func() {
		t := time.Now()
		p.stop(30 * time.Second)
		if os.Getenv("BENCHUSER_DEBUG") != "" {
			fmt.Println("stop took", time.Since(t))
		}
	}()
	total := int64(v.records)
	timeout := time.Duration(max(120, v.records/5000)) * time.Second
	var tFirst, tTenth time.Time
	var nTenth int64
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := count(qctx)
		cancel()
		now := time.Now()
		if err == nil {
			if n > 0 && tFirst.IsZero() {
				tFirst = now
				if c.profile != "" && v.row != "bare" {
					go c.captureProfiles(ctx, fmt.Sprintf("%s-%d", strings.NewReplacer(":", "-", "+", "-").Replace(v.row), seq))
				}
			}
			if n >= total/10 && tTenth.IsZero() {
				tTenth, nTenth = now, n
			}
			if n >= total {
				cpu, cerr := procCPU(p.pid())
				if cerr != nil {
					return r, cerr
				}
				r.CPUS = cpu.Seconds()
				r.PeakRSS = procStatus(p.pid(), "VmHWM")
				if brk1, err := procCPU(b.pid); err == nil && b.pid > 0 {
					r.BrkCPUS = (brk1 - brk0).Seconds()
					r.BrkPeak = procStatus(b.pid, "VmHWM")
				}
				if v.row != "bare" {
					m := scrape(ctx, c.adminPort)
					r.Batches = m["streamd_batch_duration_seconds_count"]
					r.Txns = m["streamd_transactions_total"]
					if r.Batches > 0 {
						r.BatchMeanMs = 1e3 * m["streamd_batch_duration_seconds_sum"] / r.Batches
					}
				}
				r.FirstS = tFirst.Sub(p.started).Seconds()
				r.TenthS = tTenth.Sub(p.started).Seconds()
				r.AllS = now.Sub(p.started).Seconds()
				r.Rate = float64(total) / r.AllS
				if d := now.Sub(tTenth).Seconds(); d > 0 {
					r.Steady = float64(n-nTenth) / d
				}
				if n > total {
					return r, fmt.Errorf("the output holds %d records, more than the %d read", n, total)
				}
				return r, nil
			}
		}
		if done, err := p.exited(); done {
			return r, fmt.Errorf("%s exited early (%v); log:\n%s", v.row, err, p.tail(3000))
		}
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if time.Since(p.started) > timeout {
			return r, fmt.Errorf("%s: %d of %d records out after %s; log:\n%s", v.row, n, total, timeout, p.tail(3000))
		}
		time.Sleep(every)
	}
}

// command is the process of a row: the bare loop, or streamd run with a
// generated config of pipelines pipelines (pipeline i reads ins[i%len]).
func (c *common) command(dir string, b *broker, v variant, ins []string, out, group string, pipelines int) (string, []string, error) {
	if v.row == "bare" {
		args := []string{"bare", "-brokers", strings.Join(b.seeds, ","), "-in", ins[0], "-out", out, "-group", group, "-compression", c.compression}
		if v.delivery == "exactly-once" {
			args = append(args, "-eos")
		}
		if v.maxMessageBytes > 0 {
			args = append(args, "-max-record-bytes", strconv.Itoa(v.maxMessageBytes))
		}
		if pipelines > 1 {
			args = append(args, "-loops", strconv.Itoa(pipelines))
		}
		return c.self, args, nil
	}
	c.adminPort = freePort(c.adminBase, c.adminBase+19)
	cfg := c.config(dir, b, v, ins, out, group, pipelines)
	path := filepath.Join(dir, "streamd.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", nil, err
	}
	bin := c.streamd
	if _, name, ok := strings.Cut(v.row, "@"); ok {
		bin = c.bins[name]
	}
	return bin, []string{"run", "-c", path}, nil
}

// parseRow splits a streamd row into its plugin label and variant name.
func (c *common) parseRow(row string) (label, variant string, err error) {
	row, _, _ = strings.Cut(row, "@")
	rest, ok := strings.CutPrefix(row, "streamd")
	if !ok {
		return "", "", fmt.Errorf("row %q: want bare, streamd, streamd+LABEL, streamd:NAME or streamd+LABEL:NAME", row)
	}
	rest, variant, _ = strings.Cut(rest, ":")
	if rest != "" {
		if label, ok = strings.CutPrefix(rest, "+"); !ok || label == "" {
			return "", "", fmt.Errorf("row %q: want bare, streamd, streamd+LABEL, streamd:NAME or streamd+LABEL:NAME", row)
		}
	}
	return label, variant, nil
}

// variantFlag holds -variant NAME=KEY=VALUE;...: per name, the TOML lines
// of each table ("" is [[pipeline]] itself).
type variantFlag map[string]map[string][]string

func (v variantFlag) String() string { return fmt.Sprint(map[string]map[string][]string(v)) }
func (v variantFlag) Set(s string) error {
	name, kvs, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("-variant %q: want NAME=KEY=VALUE[;KEY=VALUE]", s)
	}
	tables := map[string][]string{}
	for _, kv := range strings.Split(kvs, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return fmt.Errorf("-variant %q: %q is not KEY=VALUE", s, kv)
		}
		table := ""
		for _, t := range []string{"source", "sink", "batch", "transaction"} {
			if rest, ok := strings.CutPrefix(k, t+"."); ok {
				table, k = t, rest
			}
		}
		tables[table] = append(tables[table], strings.TrimSpace(k)+" = "+strings.TrimSpace(val))
	}
	v[name] = tables
	return nil
}

// config is the TOML a user would write for the row.
func (c *common) config(dir string, b *broker, v variant, ins []string, out, group string, pipelines int) string {
	label, vname, _ := c.parseRow(v.row)
	tables := c.variants[vname]
	lines := func(sb *strings.Builder, extra ...string) {
		for _, l := range extra {
			if l != "" {
				sb.WriteString(l + "\n")
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "data_dir = %q\n[admin]\nlisten = \"127.0.0.1:%d\"\n[plugins]\ncache_dir = %q\n[kafka]\nbrokers = [%q]\n",
		filepath.Join(dir, "data"), c.adminPort, filepath.Join(c.work, "wasm-cache"), strings.Join(b.seeds, `", "`))
	for i := 0; i < pipelines; i++ {
		in, o, g, name := ins[i%len(ins)], out, group, "bench"
		if pipelines > 1 {
			o, g, name = fmt.Sprintf("%s-%d", out, i), fmt.Sprintf("%s-%d", group, i), fmt.Sprintf("bench-%d", i)
		}
		fmt.Fprintf(&sb, "\n[[pipeline]]\nname = %q\n", name)
		if v.delivery == "exactly-once" {
			sb.WriteString("delivery = \"exactly-once\"\n")
		}
		lines(&sb, c.extra)
		lines(&sb, tables[""]...)
		if v.txn > 0 || len(tables["transaction"]) > 0 {
			sb.WriteString("[pipeline.transaction]\n")
			if v.txn > 0 {
				fmt.Fprintf(&sb, "max_records = %d\n", v.txn)
			}
			lines(&sb, tables["transaction"]...)
		}
		if len(tables["batch"]) > 0 {
			sb.WriteString("[pipeline.batch]\n")
			lines(&sb, tables["batch"]...)
		}
		fmt.Fprintf(&sb, "[pipeline.source]\ntype = \"kafka\"\ntopics = [%q]\ngroup = %q\nstart = \"earliest\"\n", in, g)
		lines(&sb, c.srcExtra)
		lines(&sb, tables["source"]...)
		for s := 0; s < v.stages; s++ {
			fmt.Fprintf(&sb, "[[pipeline.transform]]\ntype = \"wasm\"\nname = \"identity-%d\"\npath = %q\n", s, c.plugins["identity"])
		}
		if label != "" {
			fmt.Fprintf(&sb, "[[pipeline.transform]]\ntype = \"wasm\"\npath = %q\n", c.plugins[label])
		}
		fmt.Fprintf(&sb, "[pipeline.sink]\ntype = \"kafka\"\ntopic = %q\ncompression = %q\n", o, c.compression)
		if v.maxMessageBytes > 0 {
			fmt.Fprintf(&sb, "max_record_bytes = %d\n", v.maxMessageBytes)
		}
		lines(&sb, c.sinkExtra)
		lines(&sb, tables["sink"]...)
		sb.WriteString("[pipeline.errors]\npolicy = \"stop\"\n")
	}
	return sb.String()
}

// captureProfiles writes a second's execution trace, then CPU profile, of
// the streamd process under the admin port to -profile/NAME.{trace,cpu}.
func (c *common) captureProfiles(ctx context.Context, name string) {
	if err := os.MkdirAll(c.profile, 0o755); err != nil {
		return
	}
	for _, q := range []struct{ path, ext string }{{"trace?seconds=1", "trace"}, {"profile?seconds=1", "cpu"}} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", c.adminPort, q.path), nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		_ = os.WriteFile(filepath.Join(c.profile, name+"."+q.ext), b, 0o644)
	}
}
