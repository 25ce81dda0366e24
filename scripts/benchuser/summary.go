package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func cmdSummary(args []string) error {
	fs := flag.NewFlagSet("summary", flag.ContinueOnError)
	bench := fs.String("bench", "", "only results of this bench label")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("summary: name result files")
	}
	return summarize(os.Stdout, fs.Args(), *bench)
}

func readResults(files []string, bench string) ([]result, error) {
	var rs []result
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r result
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				_ = fh.Close()
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if bench == "" || r.Bench == bench {
				rs = append(rs, r)
			}
		}
		_ = fh.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// shape is what a row moved: runs of one shape in one round compare.
type shape struct {
	bench, broker, delivery string
	records, size, parts    int
	fraction                float64
	pipelines               int
}

func shapeOf(r result) shape {
	if r.Pipelines > 0 && r.Target == 0 {
		return shape{bench: r.Bench, broker: r.Broker, delivery: r.Delivery, parts: r.Partitions} // idle: every count in one table
	}
	return shape{r.Bench, r.Broker, r.Delivery, r.Records, r.Size, r.Partitions, r.Fraction, r.Pipelines}
}

// rowKey is a row within a shape.
type rowKey struct {
	row         string
	stages, txn int
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func span(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// summarize prints, per shape, each row's medians (and ranges) of its
// rates, CPU per record and peak RSS, and its ratio to the bare loop:
// the ratio of the medians and the median of the per-round ratios.
func summarize(w io.Writer, files []string, bench string) error {
	rs, err := readResults(files, bench)
	if err != nil {
		return err
	}
	byShape := map[shape][]result{}
	var shapes []shape
	for _, r := range rs {
		s := shapeOf(r)
		if _, ok := byShape[s]; !ok {
			shapes = append(shapes, s)
		}
		byShape[s] = append(byShape[s], r)
	}
	for _, s := range shapes {
		runs := byShape[s]
		if runs[0].Target > 0 || runs[0].P99ms > 0 {
			summarizeLatency(w, s, runs)
			continue
		}
		if runs[0].Window > 0 {
			summarizeIdle(w, s, runs)
			continue
		}
		fmt.Fprintf(w, "\n%s, %s broker, %s, %d records of %d B, %d partitions (load %s):\n", s.bench, s.broker, s.delivery, s.records, s.size, s.parts, loadRange(runs))
		fmt.Fprintf(w, "| row | stages | txn | rounds | records/s from start | of bare (medians; per round) | steady records/s | of bare | first record s | CPU µs/record | broker CPU µs/record | busy cores | peak RSS MiB |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		bare := map[int]result{}
		for _, r := range runs {
			if r.Row == "bare" {
				bare[r.Round] = r
			}
		}
		var bareRate, bareSteady []float64
		for _, r := range bare {
			bareRate, bareSteady = append(bareRate, r.Rate), append(bareSteady, r.Steady)
		}
		rows := map[rowKey][]result{}
		var keys []rowKey
		for _, r := range runs {
			k := rowKey{r.Row, r.Stages, r.TxnRecords}
			if _, ok := rows[k]; !ok {
				keys = append(keys, k)
			}
			rows[k] = append(rows[k], r)
		}
		for _, k := range keys {
			var rate, steady, first, cpu, bcpu, rss, ratio, sratio, busy []float64
			for _, r := range rows[k] {
				n := float64(r.Records)
				rate, steady, first = append(rate, r.Rate), append(steady, r.Steady), append(first, r.FirstS)
				cpu, bcpu, rss = append(cpu, r.CPUS*1e6/n), append(bcpu, r.BrkCPUS*1e6/n), append(rss, float64(r.PeakRSS)/(1<<20))
				busy = append(busy, (r.CPUS+r.BrkCPUS)/r.AllS)
				if b, ok := bare[r.Round]; ok {
					ratio, sratio = append(ratio, r.Rate/b.Rate), append(sratio, r.Steady/b.Steady)
				}
			}
			of, sof := "", ""
			if len(bareRate) > 0 {
				lo, hi := span(ratio)
				of = fmt.Sprintf("%.3f; %.3f (%.2f-%.2f)", median(rate)/median(bareRate), median(ratio), lo, hi)
				slo, shi := span(sratio)
				sof = fmt.Sprintf("%.3f; %.3f (%.2f-%.2f)", median(steady)/median(bareSteady), median(sratio), slo, shi)
			}
			fmt.Fprintf(w, "| %s | %d | %d | %d | %s | %s | %s | %s | %.3f | %.2f | %.2f | %.2f | %.0f |\n", k.row, k.stages, k.txn, len(rows[k]),
				medRange(rate, 1e3, "k"), of, medRange(steady, 1e3, "k"), sof, median(first), median(cpu), median(bcpu), median(busy), median(rss))
		}
	}
	return nil
}

// medRange is "median (lo-hi)" of xs in units of div.
func medRange(xs []float64, div float64, unit string) string {
	lo, hi := span(xs)
	return fmt.Sprintf("%.1f%s (%.0f-%.0f)", median(xs)/div, unit, lo/div, hi/div)
}

func loadRange(rs []result) string {
	var l []float64
	for _, r := range rs {
		l = append(l, r.Load[0])
	}
	lo, hi := span(l)
	return fmt.Sprintf("%.1f-%.1f", lo, hi)
}

func summarizeLatency(w io.Writer, s shape, runs []result) {
	fmt.Fprintf(w, "\n%s, %s broker, %s, %.0f%% of the bare loop's saturated rate (load %s):\n", s.bench, s.broker, s.delivery, 100*s.fraction, loadRange(runs))
	fmt.Fprintf(w, "| row | rounds | target records/s | sent | p50 ms | p99 ms | p99.9 ms | max ms | p99 of bare (per round) | missing | duplicates |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	bare := map[int]result{}
	for _, r := range runs {
		if r.Row == "bare" {
			bare[r.Round] = r
		}
	}
	rows := map[string][]result{}
	var keys []string
	for _, r := range runs {
		k := r.Row
		if r.Stages > 0 {
			k = fmt.Sprintf("%s (%d stages)", r.Row, r.Stages)
		}
		if _, ok := rows[k]; !ok {
			keys = append(keys, k)
		}
		rows[k] = append(rows[k], r)
	}
	for _, k := range keys {
		var target, sent, p50, p99, p999, mx, ratio []float64
		missing, dups := 0, 0
		for _, r := range rows[k] {
			dups += r.Dups
			target, sent = append(target, r.Target), append(sent, r.Sent)
			p50, p99, p999, mx = append(p50, r.P50ms), append(p99, r.P99ms), append(p999, r.P999ms), append(mx, r.MaxMs)
			missing += r.Missing
			if b, ok := bare[r.Round]; ok && b.P99ms > 0 {
				ratio = append(ratio, r.P99ms/b.P99ms)
			}
		}
		lo, hi := span(ratio)
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.2f | %s | %.1f | %.1f | %.2f (%.2f-%.2f) | %d | %d |\n", k, len(rows[k]), median(target), median(sent),
			median(p50), medRange(p99, 1, ""), median(p999), median(mx), median(ratio), lo, hi, missing, dups)
	}
}

func summarizeIdle(w io.Writer, s shape, runs []result) {
	fmt.Fprintf(w, "\n%s, %s broker, idle (load %s):\n", s.bench, s.broker, loadRange(runs))
	fmt.Fprintf(w, "| row | pipelines | rounds | RSS MiB | MiB per pipeline more (from the fewest) | CPU %% of a core | per pipeline | broker CPU %% |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	type k struct {
		row string
		n   int
	}
	rows := map[k][]result{}
	var keys []k
	for _, r := range runs {
		kk := k{r.Row, r.Pipelines}
		if _, ok := rows[kk]; !ok {
			keys = append(keys, kk)
		}
		rows[kk] = append(rows[kk], r)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if keys[i].row != keys[j].row {
			return strings.Compare(keys[i].row, keys[j].row) < 0
		}
		return keys[i].n < keys[j].n
	})
	base := map[string]k{}
	for _, kk := range keys {
		if b, ok := base[kk.row]; !ok || kk.n < b.n {
			base[kk.row] = kk
		}
	}
	medRSS := func(kk k) float64 {
		var rss []float64
		for _, r := range rows[kk] {
			rss = append(rss, float64(r.RSS)/(1<<20))
		}
		return median(rss)
	}
	for _, kk := range keys {
		var cpu, bcpu []float64
		for _, r := range rows[kk] {
			cpu, bcpu = append(cpu, 100*r.CPUS/r.Window), append(bcpu, 100*r.BrkCPUS/r.Window)
		}
		more := "-"
		if b := base[kk.row]; b.n < kk.n {
			more = fmt.Sprintf("%.2f", (medRSS(kk)-medRSS(b))/float64(kk.n-b.n))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.1f | %s | %.2f | %.3f | %.2f |\n", kk.row, kk.n, len(rows[kk]), medRSS(kk), more,
			median(cpu), median(cpu)/float64(kk.n), median(bcpu))
	}
}
