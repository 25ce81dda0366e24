//go:build linux

package plugincli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// echo is a transform that returns each record as it is.
type echo struct{}

func (echo) Manifest() plugins.Manifest {
	return plugins.Manifest{Name: "echo", Kind: plugins.KindTransform, Version: "1.0.0", ABI: 1}
}
func (echo) Close(context.Context) error { return nil }
func (echo) Transform(_ context.Context, batch []record.Record) ([]plugins.Result, error) {
	res := make([]plugins.Result, len(batch))
	for i := range batch {
		res[i].Records = []record.Record{batch[i].Clone()}
	}
	return res, nil
}

// openPTY returns a pseudo-terminal: the terminal end (what a command
// writes to) and the master end (what a terminal emulator reads).
func openPTY(t *testing.T) (term, master *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Raw: the terminal passes bytes as they are (no CR added to LF).
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(); _ = m.Close() })
	return s, m
}

// TestRunToTerminalEscaped: `streamd plugin run` writing to a terminal
// writes the control characters of records as JSON escapes (the same
// JSON, nothing the terminal acts on); --raw, or a file, gets them as
// they are.
func TestRunToTerminalEscaped(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.jsonl")
	// C1 CSI and RLO are valid UTF-8 that encoding/json leaves as they are.
	if err := os.WriteFile(in, []byte(`{"key":"k","value":"a\u001b[2J\u009b31m\u202eb","partition":0,"offset":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(context.Context, string, plugins.Options) (plugins.Plugin, error) { return echo{}, nil }
	runTo := func(w io.Writer, extra ...string) {
		t.Helper()
		var stderr bytes.Buffer
		args := append([]string{"run", "echo.wasm", "--input", in, "--cache", ""}, extra...)
		if code := Main(context.Background(), args, w, &stderr, open); code != 0 {
			t.Fatalf("plugin run %v: exit %d: %s", extra, code, stderr.String())
		}
	}
	read := func(master *os.File) string {
		t.Helper()
		_ = master.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		n, _ := master.Read(buf)
		return string(buf[:n])
	}
	term, master := openPTY(t)
	runTo(term)
	got := read(master)
	if strings.Contains(got, "\u009b") || strings.Contains(got, "\u202e") || !strings.Contains(got, `\u009b31m`) {
		t.Errorf("plugin run to a terminal: %q", got)
	}
	term2, master2 := openPTY(t)
	runTo(term2, "--raw")
	if got := read(master2); !strings.Contains(got, "\u009b31m\u202e") {
		t.Errorf("plugin run --raw to a terminal: %q", got)
	}
	var file bytes.Buffer
	runTo(&file)
	if !strings.Contains(file.String(), "\u009b31m\u202e") {
		t.Errorf("plugin run to a file: %q", file.String())
	}
}
