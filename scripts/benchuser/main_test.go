package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestSmoke runs the harness as scripts/bench-user does, small: a kfake
// broker process, 2,000 records moved by the bare loop and by `streamd
// run`, a second of latency, two idle pipelines; so that the harness
// keeps working. It checks that every run left a result with its
// figures, not the figures themselves.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds streamd and starts processes (seconds)")
	}
	dir := t.TempDir()
	streamd, self := filepath.Join(dir, "streamd"), filepath.Join(dir, "benchuser")
	start := time.Now()
	for _, b := range [][2]string{{streamd, "../../cmd/streamd"}, {self, "."}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	t.Logf("built streamd and benchuser in %s", time.Since(start).Round(time.Millisecond))
	out := filepath.Join(dir, "results.jsonl")
	common := []string{"-streamd", streamd, "-out", out, "-work", filepath.Join(dir, "work"), "-rounds", "1",
		"-kfake-addr", "127.0.0.1:" + strconv.Itoa(freeTestPort(t)), "-admin-port", strconv.Itoa(freeTestPort(t))}
	for _, args := range [][]string{
		{"throughput", "-records", "2000", "-rows", "bare,streamd"},
		{"latency", "-rows", "bare,streamd", "-sat-rate", "2000", "-fractions", "0.5", "-warmup", "300ms", "-window", "700ms"},
		{"idle", "-rows", "streamd", "-pipelines", "2", "-settle", "300ms", "-window", "700ms"},
	} {
		start := time.Now()
		cmd := exec.Command(self, append(args, common...)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("benchuser %s: %v\n%s", args[0], err, b)
		}
		t.Logf("benchuser %s: %s", args[0], time.Since(start).Round(time.Millisecond))
	}
	rs, err := readResults([]string{out}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 5 {
		t.Fatalf("%d results, want 5 (2 throughput, 2 latency, 1 idle): %+v", len(rs), rs)
	}
	for _, r := range rs {
		switch r.Bench {
		case "throughput":
			if r.Rate <= 0 || r.AllS <= 0 || r.CPUS < 0 || r.PeakRSS <= 0 || r.Records != 2000 {
				t.Errorf("throughput result without its figures: %+v", r)
			}
		case "latency":
			if r.Got == 0 || r.Missing != 0 || r.P50ms <= 0 || r.P99ms < r.P50ms || r.PeakRSS <= 0 {
				t.Errorf("latency result without its figures: %+v", r)
			}
		case "idle":
			if r.RSS <= 0 || r.Window <= 0 || r.Pipelines != 2 {
				t.Errorf("idle result without its figures: %+v", r)
			}
		default:
			t.Errorf("result of bench %q", r.Bench)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "work", "broker")); err != nil {
		t.Errorf("no broker dir: %v", err)
	}
}

func freeTestPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}
