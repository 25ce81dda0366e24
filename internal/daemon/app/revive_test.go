package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins/load"
)

// TestHotReloadRevivesFailedPipeline: a pipeline that failed on its
// plugin (a trap under policy stop) stays failed while the plugin's file
// is replaced by one that does not load, and that refused reload shows in
// /pipelines and /v1/status; once a version that loads replaces it, the
// pipeline starts again by itself, on the new version, and goes on. A
// second pipeline keeps the daemon running meanwhile.
func TestHotReloadRevivesFailedPipeline(t *testing.T) {
	dir := t.TempDir()
	wasm := filepath.Join(dir, "poison.wasm")
	testenv.Wat2Wasm(t, "../../../examples/wasm/wat/poison.wat", wasm)
	// The fixed version: the same plugin (name, kind), version 1.0.1,
	// that no longer traps on "poison".
	orig, err := os.ReadFile("../../../examples/wasm/wat/poison.wat")
	if err != nil {
		t.Fatal(err)
	}
	fixedWat := strings.Replace(strings.Replace(string(orig), "(i32.const 0x73696f70)", "(i32.const 0x7a7a7a7a)", 1), `1.0.0`, `1.0.1`, 1)
	if fixedWat == string(orig) {
		t.Fatal("could not make the fixed version")
	}
	if err := os.WriteFile(filepath.Join(dir, "fixed.wat"), []byte(fixedWat), 0o644); err != nil {
		t.Fatal(err)
	}
	fixed := filepath.Join(dir, "fixed.wasm")
	testenv.Wat2Wasm(t, filepath.Join(dir, "fixed.wat"), fixed)
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"value":"ok-1"}`+"\n"+`{"value":"poison"}`+"\n"+`{"value":"ok-3"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	src := fmt.Sprintf(`data_dir = %q
[admin]
listen = %q
[plugins]
watch = "100ms"
[[pipeline]]
name = "p"
[pipeline.source]
type = "file"
path = %q
[[pipeline.transform]]
type = "wasm"
name = "poison"
path = %q
[pipeline.sink]
type = "drop"
[[pipeline]]
name = "keep"
[pipeline.source]
type = "generate"
rate = 10
[pipeline.sink]
type = "drop"
`, filepath.Join(dir, "data"), addr, in, wasm)
	cfg, err := config.LoadForTest(writeConfig(t, dir, src))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Build(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), load.Open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err) // p's failure was replaced by its restart
		}
		testenv.Close(t, context.Background(), a)
	})
	// p, as /v1/status has it (JSON).
	status := func() map[string]any {
		b, err := json.Marshal(a.Status())
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Pipelines []map[string]any }
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Pipelines {
			if p["name"] == "p" {
				return p
			}
		}
		t.Fatalf("no pipeline p in %s", b)
		return nil
	}
	waitFor := func(what string, ok func(map[string]any) bool) map[string]any {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			p := status()
			if ok(p) {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: never; p is %v", what, p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("p fails on the poison record", func(p map[string]any) bool { return p["state"] == "failed" })

	// A version that does not load: refused, the failed pipeline stays as it is.
	if err := os.WriteFile(wasm, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := waitFor("the refused reload in /v1/status", func(p map[string]any) bool { return p["reload_refused"] != nil })
	if p["state"] != "failed" || p["restarts"].(float64) != 0 {
		t.Fatalf("after a refused reload: %v", p)
	}
	refused := fmt.Sprint(p["reload_refused"])
	if !strings.Contains(refused, "poison") || !strings.Contains(refused, "not a WebAssembly module") {
		t.Fatalf("reload_refused %s: want the stage and the error", refused)
	}
	resp, err := http.Get("http://" + addr + "/pipelines")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `"reload_refused"`) || !strings.Contains(string(body), "not a WebAssembly module") {
		t.Fatalf("/pipelines does not show the refused reload:\n%s", body)
	}

	// The fixed version: p starts again by itself and reads its input again.
	b, err := os.ReadFile(fixed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wasm, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p = waitFor("p starts again on the fixed version and ends", func(p map[string]any) bool {
		return p["restarts"].(float64) == 1 && p["state"] == "done"
	})
	if p["records_out"].(float64) != 3 || p["reload_refused"] != nil {
		t.Fatalf("after the fixed version: %v", p)
	}
	if p["auto_restarts"].(float64) != 1 || !strings.Contains(fmt.Sprint(p["last_restart_cause"]), "reloaded") {
		t.Fatalf("the restart is not said to be automatic, after a reload: %v", p)
	}
}

func writeConfig(t *testing.T, dir, src string) string {
	t.Helper()
	path := filepath.Join(dir, "streamd.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
