package logs

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func jsonLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLineWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewLineWriter(jsonLogger(&buf), "stderr")
	for _, chunk := range []string{"plain li", "ne\r\n\n   \n", `{"@level":"error","@message":"structured","k":"v"}` + "\n", `{"not":"hclog"}` + "\n", "panic: boom\n\tgoroutine 1\n", "tail"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	want := []struct{ level, msg string }{
		{"INFO", "plain line"},
		{"ERROR", "structured"},
		{"INFO", `{"not":"hclog"}`},
		{"ERROR", "panic: boom"},
		{"ERROR", "\tgoroutine 1"},
		{"ERROR", "tail"},
	}
	got := lines(t, &buf)
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i, w := range want {
		if got[i]["level"] != w.level || got[i]["msg"] != w.msg || got[i]["stream"] != "stderr" {
			t.Errorf("line %d: %v, want %s %q", i, got[i], w.level, w.msg)
		}
	}
	if got[1]["k"] != "v" {
		t.Errorf("structured line lost its field: %v", got[1])
	}
}

func TestHCLog(t *testing.T) {
	var buf bytes.Buffer
	h := NewHCLog(jsonLogger(&buf).With("plugin", "orders"), "plugin-binary")
	h.Warn("plugin failed to exit gracefully", "plugin", "/bin/x", "id", 7)
	h.Named("plugin-binary").Info("a stderr line, already logged by a LineWriter")
	h.Named("stdio").With("a", 1).Error("e")
	if h.Named("plugin-binary").GetLevel() != hclog.Off {
		t.Error("the quiet child is not off")
	}
	got := lines(t, &buf)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(got), buf.String())
	}
	if got[0]["level"] != "WARN" || got[0]["plugin"] != "orders" || got[0]["path"] != "/bin/x" || got[0]["id"] != 7.0 {
		t.Errorf("warn line %v", got[0])
	}
	if got[1]["component"] != "stdio" || got[1]["a"] != 1.0 || got[1]["level"] != "ERROR" {
		t.Errorf("named line %v", got[1])
	}
	if strings.Count(buf.String(), `"plugin"`) != 2 {
		t.Errorf("duplicate plugin keys:\n%s", buf.String())
	}
}
