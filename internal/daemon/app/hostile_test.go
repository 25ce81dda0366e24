package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// hostileGuest is a hand-written plugin that attacks the sandbox (a
// minimal transform whose streamd_process runs process, whose start
// function, if any, runs start), with what the failure of its pipeline
// must say.
type hostileGuest struct {
	name, pages, decls, process, start, want string
	noCheck                                  bool // as written, invalid: wat2wasm --no-check
}

// deep is n nested blocks.
func deep(n int) string { return strings.Repeat("(block ", n) + strings.Repeat(")", n) }

// hostileGuests attack while the pipelines run (at each call) and while
// they load. The daemon runs them with [plugins] timeout = 500ms,
// max_module_bytes = 400000 and compile_timeout = 1s.
var hostileGuests = []hostileGuest{
	// Bulk memory work between two loop heads: four 16 MiB fills.
	{name: "fill", pages: "256", process: `(loop $l (memory.fill (i32.const 0) (i32.const 1) (i32.const 16777216))
		(memory.fill (i32.const 0) (i32.const 1) (i32.const 16777216)) (br $l))`,
		want: "plugin call timed out after 500ms"},
	// A table grown past max_table_elements, then filled.
	{name: "table", pages: "1", decls: `(table $t 1 funcref)`, process: `(if (i32.eq (table.grow $t (ref.null func) (i32.const 16777216)) (i32.const -1)) (then unreachable))
		(table.fill $t (i32.const 0) (ref.null func) (table.size $t))`,
		want: "memory limit reached: the guest asked for a table of 16777217 elements (128 MiB), more than max_table_elements = 1048576 (8 MiB) allows"},
	// 16 MiB log lines, forever.
	{name: "log", pages: "256", process: `(memory.fill (i32.const 0) (i32.const 97) (i32.const 16777216))
		(loop $l (call $log (i32.const 1) (i32.const 0) (i32.const 16777216)) (br $l))`,
		want: "plugin call timed out after 500ms"},
	// The global one past its own: the fuel counter the rewrite adds,
	// refilled forever. Refused at load.
	{name: "refuel", pages: "1", decls: `(global $g (mut i32) (i32.const 0))`,
		process: `(loop $l (global.set 1 (i32.const 1000000)) (br $l))`, noCheck: true,
		want: "global.set 1: the module declares 1 globals"},
	// A start function that never returns: the load is given up on at
	// the call timeout.
	{name: "start", pages: "1", start: `(loop $l (br $l))`, process: `(nop)`,
		want: "instantiate: plugin call timed out after 500ms"},
	// Larger than max_module_bytes.
	{name: "size", pages: "1", decls: `(data (i32.const 4096) "` + strings.Repeat("x", 500_000) + `")`, process: `(nop)`,
		want: "more than max_module_bytes = 400000"},
	// 12 functions nested 8,000 deep, about 0.5 s each to compile.
	{name: "compile", pages: "1", decls: strings.Repeat("(func "+deep(8000)+")\n", 12), process: `(nop)`,
		want: "compiling took longer than compile_timeout = 1s"},
}

// buildHostile writes the hostile guest g as a plugin into dir and returns
// its path.
func buildHostile(t *testing.T, dir string, g hostileGuest) string {
	t.Helper()
	manifest := `{"name":"hostile-` + g.name + `","kind":"transform","version":"1.0.0","abi":1}`
	start := ""
	if g.start != "" {
		start = "(start $start) (func $start " + g.start + ")"
	}
	src := fmt.Sprintf(`(module
  (import "streamd" "reply" (func $reply (param i32 i32)))
  (import "streamd" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") %s)
  %s
  (func (export "streamd_abi_v1"))
  (func (export "streamd_buffer") (param i32) (result i32) (i32.const 1024))
  (data (i32.const 0) %q)
  (func (export "streamd_manifest") (result i32) (call $reply (i32.const 0) (i32.const %d)) (i32.const 0))
  (func (export "streamd_init") (param i32) (result i32) (i32.const 0))
  (func (export "streamd_process") (param $len i32) (result i32) %s (i32.const 2))
  %s)`, g.pages, g.decls, manifest, len(manifest), g.process, start)
	in := filepath.Join(dir, g.name+".wat")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, g.name+".wasm")
	var extra []string
	if g.noCheck {
		extra = append(extra, "--no-check")
	}
	testenv.Wat2Wasm(t, in, out, extra...)
	return out
}

// TestHostileBesideHealthy: hostile Wasm stages (bulk memory work between
// checks, a table grown past its cap, unbounded logging, a rewrite of the
// fuel counter, a start function that never returns, a module too large,
// a compile too long) run in pipelines of their own beside a healthy one
// in one daemon. The healthy pipeline
// keeps its rate, /healthz answers every probe within 100 ms (500 ms on an
// overloaded machine: testenv.ProbeBound), and each
// hostile pipeline fails with a message that names the cause. (Before the
// sandbox's fixes the first froze the whole process, /healthz included.)
func TestHostileBesideHealthy(t *testing.T) {
	b := testenv.Kafka(t)
	out := testenv.Topic(t, "healthy-out")
	b.CreateTopic(t, out, 1)
	dir := t.TempDir()
	const rate = 200
	cfg := fmt.Sprintf(`[plugins]
timeout = "500ms"
max_module_bytes = 400000
compile_timeout = "1s"

[[pipeline]]
name = "healthy"
[pipeline.source]
type = "generate"
rate = %d
[pipeline.sink]
type = "kafka"
topic = %q
`, rate, out)
	for _, g := range hostileGuests {
		cfg += fmt.Sprintf(`
[[pipeline]]
name = "hostile-%s"
[pipeline.source]
type = "generate"
rate = 10
[[pipeline.transform]]
type = "wasm"
path = %q
[pipeline.sink]
type = "drop"
`, g.name, buildHostile(t, dir, g))
	}
	addr := runDaemonLoading(t, b, cfg, "pipeline hostile-")
	adm := kadm.NewClient(b.Client(t))
	written := func() int64 {
		offs, err := adm.ListEndOffsets(t.Context(), out)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}
	before, start := written(), time.Now()

	// Probe /healthz every 50 ms for 6 s.
	var worst time.Duration
	var slow, late, probes int
	bound := testenv.ProbeBound()
	client := &http.Client{Timeout: 5 * time.Second}
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		t0 := time.Now()
		resp, err := client.Get("http://" + addr + "/healthz")
		d := time.Since(t0)
		if err == nil {
			_ = resp.Body.Close()
		}
		probes++
		worst = max(worst, d)
		if d > 100*time.Millisecond {
			slow++
		}
		if err != nil || resp.StatusCode != http.StatusOK || d > bound {
			late++
		}
	}
	n, elapsed := written()-before, time.Since(start)
	if late > 0 && !testenv.Race { // the race detector's pauses: bounds are checked in the passes without it
		t.Errorf("%d of %d /healthz probes failed or took more than %v (the slowest %v)", late, probes, bound, worst)
	}

	// Each hostile pipeline failed, saying why.
	resp, err := client.Get("http://" + addr + "/pipelines")
	if err != nil {
		t.Fatal(err)
	}
	var statuses []struct {
		Name, State, Error string
	}
	err = json.NewDecoder(resp.Body).Decode(&statuses)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, s := range statuses {
		byName[s.Name] = s.State + ": " + s.Error
	}
	for _, g := range hostileGuests {
		got := byName["hostile-"+g.name]
		if !strings.HasPrefix(got, "failed: ") || !strings.Contains(got, g.want) {
			t.Errorf("pipeline hostile-%s: %q, want failed with %q", g.name, got, g.want)
		}
	}
	// The console shows them too, those that failed to load included,
	// with the cause.
	for _, g := range hostileGuests {
		resp, err := client.Get("http://" + addr + "/ui/api/pipelines/hostile-" + g.name)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Status struct{ State, Error string }
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("console page of hostile-%s: %d %v", g.name, resp.StatusCode, err)
		}
		if page.Status.State != "failed" || !strings.Contains(page.Status.Error, g.want) {
			t.Errorf("console page of hostile-%s: %s: %q, want failed with %q", g.name, page.Status.State, page.Status.Error, g.want)
		}
	}
	if got := byName["healthy"]; !strings.HasPrefix(got, "running") {
		t.Errorf("pipeline healthy: %q, want running", got)
	}

	// The healthy pipeline kept its rate: at least 90% of it while the
	// hostile ones ran.
	if want := int64(0.9 * rate * elapsed.Seconds()); n < want {
		t.Errorf("the healthy pipeline wrote %d records in %v, want at least %d (%d/s)", n, elapsed.Round(time.Millisecond), want, rate)
	}
	t.Logf("%d /healthz probes, %d slower than 100 ms (bound %v at this load), the slowest %v; the healthy pipeline wrote %d records in %v (%.0f/s of %d/s)",
		probes, slow, bound, worst.Round(time.Millisecond), n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), rate)
	for _, g := range hostileGuests {
		t.Logf("hostile-%s: %s", g.name, byName["hostile-"+g.name])
	}
}
