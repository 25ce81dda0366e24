package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestWasmGrantsFromTOML: the grant keys of
// a [[pipeline.transform]] reach the guest. Two pipelines run the hostile
// probe guest (runtime/testdata/wasiprobe.c) over the same commands: one
// with clock = true, random = false and a read-only dirs grant, one with
// defaults (a fake clock, crypto/rand, no files).
func TestWasmGrantsFromTOML(t *testing.T) {
	testenv.Tool(t, "clang")
	root := repoRoot(t)
	dir := t.TempDir()
	plugin := filepath.Join(dir, "wasiprobe.wasm")
	if out, err := exec.Command("sh", filepath.Join(root, "examples/wasm/c/build-plugin.sh"), plugin,
		filepath.Join(root, "runtime/testdata/wasiprobe.c")).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "sysroot is missing") {
			testenv.Missing(t, "wasi-libc (run scripts/install-tools)")
		}
		t.Fatalf("build wasiprobe: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in", "x.txt"), []byte("granted"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmds := []string{"time", "rand 16", "rand 16", "read /in/x.txt", "write /in/y.txt nope"}
	var in strings.Builder
	for i, c := range cmds {
		b, _ := json.Marshal(map[string]any{"key": strconv.Itoa(i), "value": c})
		in.Write(append(b, '\n'))
	}
	input := filepath.Join(dir, "cmds.jsonl")
	if err := os.WriteFile(input, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	pipeline := func(name, grants string) string {
		return fmt.Sprintf(`
[[pipeline]]
name = %q
[pipeline.source]
type = "file"
path = "cmds.jsonl"
[[pipeline.transform]]
type = "wasm"
path = "wasiprobe.wasm"
%s
[pipeline.sink]
type = "file"
path = "%s.jsonl"
`, name, grants, name)
	}
	cfg := filepath.Join(dir, "streamd.toml")
	body := "[kafka]\nbrokers = [\"127.0.0.1:1\"]   # not used: file sources and sinks\n" +
		pipeline("granted", `clock = true
random = false
dirs = { "/in" = "in:ro" }`) + pipeline("defaults", "")
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	d := start(t, cfg)
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("streamd run: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the file pipelines did not end after their last record")
	}
	outputs := func(name string) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(dir, name+".jsonl")))), "\n") {
			var r struct{ Value string }
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("%s: %v: %s", name, err, l)
			}
			out = append(out, r.Value)
		}
		if len(out) != len(cmds) {
			t.Fatalf("%s: %d records out, want %d: %q", name, len(out), len(cmds), out)
		}
		return out
	}
	wall := func(out string) time.Time {
		ns, err := strconv.ParseInt(strings.Fields(strings.TrimPrefix(out, "ok:"))[0], 10, 64)
		if err != nil {
			t.Fatalf("time: %s", out)
		}
		return time.Unix(0, ns)
	}

	g := outputs("granted")
	if w := wall(g[0]); time.Since(w).Abs() > 10*time.Minute {
		t.Errorf("clock = true: the guest's wall clock reads %v", w)
	}
	if g[3] != "ok:granted" || !strings.HasPrefix(g[4], "err:") {
		t.Errorf("read-only dirs grant: read %s, write %s", g[3], g[4])
	}

	df := outputs("defaults")
	if w := wall(df[0]); w.Year() != 2022 {
		t.Errorf("no clock grant: the guest's wall clock reads %v, want the fake 2022-01-01", w)
	}
	if !strings.HasPrefix(df[3], "err:") {
		t.Errorf("no dirs grant: read %s", df[3])
	}
	// random = false is wazero's fixed sequence (a seeded math/rand source,
	// the same in every instance and run); the default is crypto/rand.
	const fixed = "ok:538c7f96b164bf1b97bb9f4bb472e89f"
	if g[1] != fixed {
		t.Errorf("random = false: first draw %s, want the fixed sequence %s", g[1], fixed)
	}
	if df[1] == fixed || df[1] == df[2] {
		t.Errorf("default random: draws %s, %s", df[1], df[2])
	}
	if !strings.Contains(d.log.String(), "without the clock grant") {
		t.Errorf("no log line about the fake clock of pipeline defaults")
	}
}
