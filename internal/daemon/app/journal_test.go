package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/journal"
	"github.com/streamd/streamd/plugins/load"
)

func journalConfig(t *testing.T, store string) *config.Config {
	t.Helper()
	src := fmt.Sprintf(`
[kafka]
brokers = ["127.0.0.1:1"]
[journal]
store = %q
[[pipeline]]
name = "replicate"
[pipeline.source]
type = "kafka"
topics = ["orders-journal"]
group = "replicator"
[pipeline.sink]
type = "journal"
`, store)
	dir := t.TempDir()
	file := filepath.Join(dir, "streamd.toml")
	cfg, err := config.Parse(file, []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// `streamd lint` (Build then Close) checks the
// journal store without creating or changing anything: no database file,
// no directory. A store that could never be opened still fails lint,
// naming it.
func TestLintCreatesNoJournalStore(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	for _, tc := range []struct{ name, path string }{
		{"existing directory", filepath.Join(dir, "journal.db")},
		{"missing directory", filepath.Join(dir, "data", "sub", "journal.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := app.Build(ctx, journalConfig(t, "sqlite:"+tc.path), log, load.Open, io.Discard)
			if err != nil {
				t.Fatalf("lint: %v", err)
			}
			testenv.Close(t, context.Background(), a)
			for _, p := range []string{tc.path, tc.path + "-wal", tc.path + "-shm", filepath.Dir(tc.path)} {
				if p == dir {
					continue
				}
				if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("lint left %s behind (%v)", p, err)
				}
			}
		})
	}
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "journal.db")
	if _, err := app.Build(ctx, journalConfig(t, "sqlite:"+bad), log, load.Open, io.Discard); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("lint of a store under a file: %v, want an error naming %s", err, bad)
	}
}

// The journal store on a file
// system that fills up. The replicator pipeline reports the full disk
// naming the store, retries (no record gets a verdict: nothing dropped or
// dead-lettered), and once there is room replicates everything.
func TestJournalStoreDiskFullThroughDaemon(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		testenv.Missing(t, fmt.Sprintf("a tmpfs mount (needs root or CAP_SYS_ADMIN): %v", err))
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	b := testenv.Kafka(t)
	topic := testenv.Topic(t, "jfull")
	b.CreateTopic(t, topic, 1)
	path := filepath.Join(dir, "journal.db")
	var logs syncBuffer
	src := fmt.Sprintf(`
[kafka]
brokers = [%q]
[journal]
store = "sqlite:%s"
[[pipeline]]
name = "replicate"
[pipeline.errors]
retry_initial = "20ms"
retry_max = "100ms"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
start = "earliest"
[pipeline.sink]
type = "journal"
`, strings.Join(b.Seeds, `","`), path, topic, topic+"-replicator")
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "streamd.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Build(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)), load.Open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), a)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- a.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	// Fill the file system but for ~256 kB once the store exists.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the store was not created")
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, int(st.Bavail)*int(st.Bsize)-256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := journal.OpenStore(ctx, "sqlite:"+filepath.Join(t.TempDir(), "writer.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), ws)
	j := journal.New(b.Client(t), ws)
	defer testenv.Close(t, context.Background(), j)
	key := journal.Key{Topic: topic, ID: "full"}
	pad := strings.Repeat("0123456789", 100)
	const appends, per = 60, 10
	for i := range appends {
		evs := make([]journal.Event, per)
		for e := range evs {
			s := int64(i*per + e + 1)
			evs[e] = journal.Event{SeqNr: s, PayloadType: journal.PayloadJSON, Payload: []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, s, pad))}
		}
		if _, err := j.Append(ctx, key, evs); err != nil {
			t.Fatal(err)
		}
	}
	// The pipeline says the disk is full, naming the store, and retries.
	for deadline := time.Now().Add(30 * time.Second); !(strings.Contains(logs.String(), "disk full") && strings.Contains(logs.String(), path)); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line about the full disk of %s:\n%s", path, logs.String())
		}
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "disk full") {
			t.Logf("log: %.400s", l)
			break
		}
	}
	if n, _ := gatherSum(a, "streamd_journal_replicator_events_total"); n >= appends*per {
		t.Fatalf("all %v events replicated on a full disk", n)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	want := int64(appends * per)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n, err := gatherSum(a, "streamd_journal_replicator_events_total")
		if err == nil && n >= float64(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicated %v of %d events after the disk had room again\n%s", n, want, logs.String())
		}
	}
	for _, name := range []string{"streamd_records_dropped_total", "streamd_records_dlq_total"} {
		if n, err := gatherSum(a, name); err == nil && n != 0 {
			t.Errorf("%s = %v during a full disk, want 0", name, n)
		}
	}
	rs, err := journal.OpenStore(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), rs)
	rj := journal.New(b.Client(t), rs)
	defer testenv.Close(t, context.Background(), rj)
	var got int64
	if _, err := rj.Read(ctx, key, 1, func(e journal.Event) error { got++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("read %d events, want %d", got, want)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
