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

// hostileGuests are hand-written plugins that attack the sandbox while the
// pipelines run (a minimal transform whose streamd_process runs the body),
// each with what the failure of its pipeline must say.
var hostileGuests = []struct {
	name, pages, decls, process, want string
}{
	// Bulk memory work between two loop heads: four 16 MiB fills.
	{"fill", "256", ``, `(loop $l (memory.fill (i32.const 0) (i32.const 1) (i32.const 16777216))
		(memory.fill (i32.const 0) (i32.const 1) (i32.const 16777216)) (br $l))`,
		"plugin call timed out after 500ms"},
	// A table grown past max_table_elements, then filled.
	{"table", "1", `(table $t 1 funcref)`, `(if (i32.eq (table.grow $t (ref.null func) (i32.const 16777216)) (i32.const -1)) (then unreachable))
		(table.fill $t (i32.const 0) (ref.null func) (table.size $t))`,
		"memory limit reached: the guest asked for a table of 16777217 elements (128 MiB), more than max_table_elements = 1048576 (8 MiB) allows"},
	// 16 MiB log lines, forever.
	{"log", "256", ``, `(memory.fill (i32.const 0) (i32.const 97) (i32.const 16777216))
		(loop $l (call $log (i32.const 1) (i32.const 0) (i32.const 16777216)) (br $l))`,
		"plugin call timed out after 500ms"},
}

// buildHostile writes the hostile guest g as a plugin into dir and returns
// its path.
func buildHostile(t *testing.T, dir, name, pages, decls, process string) string {
	t.Helper()
	manifest := `{"name":"hostile-` + name + `","kind":"transform","version":"1.0.0","abi":1}`
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
  (func (export "streamd_process") (param $len i32) (result i32) %s (i32.const 2)))`, pages, decls, manifest, len(manifest), process)
	in := filepath.Join(dir, name+".wat")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+".wasm")
	testenv.Wat2Wasm(t, in, out)
	return out
}

// TestHostileBesideHealthy: hostile Wasm stages (bulk memory work between
// checks, a table grown past its cap, unbounded logging) run in pipelines
// of their own beside a healthy one in one daemon. The healthy pipeline
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
`, g.name, buildHostile(t, dir, g.name, g.pages, g.decls, g.process))
	}
	addr := runDaemonFailing(t, b, cfg, "pipeline hostile-")
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
	if late > 0 {
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
