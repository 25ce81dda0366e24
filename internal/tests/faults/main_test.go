package faults

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/tests/testenv/faultproxy"
)

var (
	streamdBin string
	root       string // repository root
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The cases spend most of their time waiting out faults: run them all
	// at once unless -parallel was given (its default is GOMAXPROCS, 2 on
	// CI, which would run them two by two).
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		if err := flag.Set("test.parallel", "32"); err != nil {
			panic(err)
		}
	}
	wd, _ := os.Getwd()
	root = filepath.Join(wd, "..", "..", "..")
	tmp, err := os.MkdirTemp("", "streamd-faults")
	if err != nil {
		panic(err)
	}
	// STREAMD_BIN: the binary scripts/test built (bin/streamd); otherwise
	// build it, so that `go test ./internal/tests/faults` tests this tree.
	streamdBin = os.Getenv("STREAMD_BIN")
	if streamdBin == "" {
		streamdBin = filepath.Join(tmp, "streamd")
		out, err := exec.Command("go", "build", "-o", streamdBin, "github.com/streamd/streamd/cmd/streamd").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building streamd: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	if real != nil {
		real.shutdown()
	}
	writeReport()
	_ = os.RemoveAll(tmp) // a temp dir; no test is left to fail
	os.Exit(code)
}

// backend is "kafka" (Apache Kafka, STREAMD_FAULT_KAFKA_PORT) or "kfake".
func backend() string {
	if os.Getenv("STREAMD_FAULT_KAFKA_PORT") != "" {
		return "kafka"
	}
	return "kfake"
}

// realKafka is the suite's own Apache Kafka broker, shared by the cases:
// those that stop or freeze it hold wide, the others hold it shared.
type realKafka struct {
	port    int
	dir     string
	env     []string
	proxies chan *faultproxy.Proxy // free proxies
	wide    sync.RWMutex
}

const nProxies = 4

var (
	real     *realKafka
	realOnce sync.Once
	realErr  string
)

// theKafka starts the suite's broker on first use.
func theKafka(t *testing.T) *realKafka {
	t.Helper()
	realOnce.Do(func() {
		port, err := strconv.Atoi(os.Getenv("STREAMD_FAULT_KAFKA_PORT"))
		if err != nil {
			realErr = "STREAMD_FAULT_KAFKA_PORT is not a port number"
			return
		}
		// The proxies close their sockets for net-refused and listen
		// again: a port the kernel may give an outgoing connection
		// meanwhile fails that ("address already in use", in a trial CI
		// run with STREAMD_KAFKA_PORT=33092).
		if lo, hi := faultproxy.EphemeralRange(); port+2+2*nProxies-1 >= lo && port <= hi {
			realErr = fmt.Sprintf("STREAMD_FAULT_KAFKA_PORT=%d: the suite's ports %d-%d overlap the kernel's ephemeral port range %d-%d (set STREAMD_KAFKA_PORT or STREAMD_FAULT_KAFKA_PORT below %d)",
				port, port, port+2+2*nProxies-1, lo, hi, lo-2-2*nProxies)
			return
		}
		if _, err := exec.LookPath("java"); err != nil {
			realErr = "java (scripts/install-tools kafka)"
			return
		}
		k := &realKafka{port: port, proxies: make(chan *faultproxy.Proxy, nProxies)}
		k.dir = filepath.Join(os.TempDir(), fmt.Sprintf("streamd-faults-kafka-%d", port))
		var pairs []string
		for i := 0; i < nProxies; i++ {
			pairs = append(pairs, fmt.Sprintf("%d:%d", port+2+i, port+2+nProxies+i))
		}
		k.env = append(os.Environ(), fmt.Sprintf("STREAMD_KAFKA_PORT=%d", port), "STREAMD_KAFKA_DIR="+k.dir,
			"STREAMD_KAFKA_PROXIED="+strings.Join(pairs, " "))
		if out, err := k.script("start"); err != nil {
			realErr = fmt.Sprintf("scripts/kafka start on port %d: %v\n%s", port, err, out)
			return
		}
		for i := 0; i < nProxies; i++ {
			p, err := faultproxy.Listen(fmt.Sprintf("127.0.0.1:%d", port+2+nProxies+i), fmt.Sprintf("127.0.0.1:%d", port+2+i))
			if err != nil {
				realErr = fmt.Sprintf("proxy: %v", err)
				_, _ = k.script("stop") // realErr above says why
				return
			}
			k.proxies <- p
		}
		real = k
	})
	if real == nil {
		testenv.Missing(t, "Apache Kafka for the fault suite: "+realErr)
	}
	return real
}

func (k *realKafka) script(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "scripts", "kafka"), args...)
	cmd.Env = k.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (k *realKafka) shutdown() {
	close(k.proxies)
	for p := range k.proxies {
		_ = p.Close(context.Background())
	}
	if out, err := k.script("stop"); err != nil {
		fmt.Fprintf(os.Stderr, "scripts/kafka stop: %v\n%s", err, out)
	}
}

// results are what every case measured, for the report.
var (
	resultsMu sync.Mutex
	results   []*result
)

// result is one pipeline's account of one fault.
type result struct {
	Backend string `json:"backend"`
	Case    string `json:"case"`
	Fault   string `json:"fault"`
	Policy  string `json:"policy"`
	// Role says what the daemon running the pipeline did: rode the fault
	// out, or was stopped with SIGTERM during it and started again after.
	Role string `json:"role"`
	// In counts the distinct input records, Out the output records, DLQ
	// the dead-lettered ones; Missing counts input records in neither
	// (less those the policy legitimately keeps out: a bad record
	// dropped, or held back uncommitted behind a bad one by stop);
	// Duplicates counts output records beyond their input copies.
	In         int `json:"in"`
	Out        int `json:"out"`
	DLQ        int `json:"dlq"`
	Missing    int `json:"missing"`
	Duplicates int `json:"duplicates"`
	DupBound   int `json:"duplicate_bound"`
	// Held counts records behind a bad record under policy stop.
	Held int `json:"held,omitempty"`
	// RecoverSeconds is how long after the fault ended the last record
	// produced before its end reached the output (-1: never).
	RecoverSeconds float64 `json:"recover_seconds"`
	// Readyz is what /readyz said about the pipeline during the fault.
	Readyz string `json:"readyz"`
	// SigtermSeconds is how long the daemon took to exit after SIGTERM
	// during the fault (role "sigterm"), ExitCode how it exited.
	SigtermSeconds float64  `json:"sigterm_seconds,omitempty"`
	ExitCode       *int     `json:"exit_code,omitempty"`
	Failures       []string `json:"failures,omitempty"`
}

func record(r *result) {
	resultsMu.Lock()
	results = append(results, r)
	resultsMu.Unlock()
}

func writeReport() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return
	}
	sort.SliceStable(results, func(i, j int) bool {
		a, b := results[i], results[j]
		if a.Case != b.Case {
			return a.Case < b.Case
		}
		if a.Role != b.Role {
			return a.Role < b.Role
		}
		return a.Policy > b.Policy // stop, drop, dlq
	})
	path := os.Getenv("STREAMD_FAULT_REPORT")
	if path == "" {
		path = filepath.Join(root, "bin", "faults-"+backend()+".json")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "fault report: %v\n", err)
		return
	}
	b, _ := json.MarshalIndent(results, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "fault report: %v\n", err)
		return
	}
	fmt.Fprintf(os.Stderr, "fault report: %d rows in %s\n", len(results), path)
}
