package journal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/journal/internal/sqlstore"
	"github.com/streamd/streamd/plugins"
)

// tmpfs mounts a tmpfs of size bytes on a new directory for the test.
func tmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		testenv.Missing(t, fmt.Sprintf("a tmpfs mount (needs root or CAP_SYS_ADMIN): %v", err))
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// Open files (a store not closed yet): lazily.
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// The SQLite store on a file system that is full.
// The replicator's Write fails as a whole (transient, naming the store's
// path and the full disk), the pointer does not move, no record gets a
// verdict; once there is room the same records replicate and every event
// reads back.
func TestReplicatorDiskFull(t *testing.T) {
	dir := tmpfs(t, 4<<20)
	path := filepath.Join(dir, "journal.db")
	h := newHarnessOn(t, "sqlite:"+path, 1)
	key := Key{Topic: h.topic, ID: "full"}
	// Fill the file system but for ~256 kB.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, int(st.Bavail)*int(st.Bsize)-256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("0123456789", 100)
	for s := int64(1); s <= 40; s++ {
		evs := ev(s*10-9, s*10-8, s*10-7, s*10-6, s*10-5, s*10-4, s*10-3, s*10-2, s*10-1, s*10)
		for i := range evs {
			evs[i].Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, evs[i].SeqNr, payload))
		}
		if _, err := h.j.Append(h.ctx, key, evs); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []int64 {
		t.Helper()
		var got []int64
		if _, err := h.j.Read(h.ctx, key, 1, func(e Event) error {
			if want := fmt.Sprintf(`{"n":%d,"pad":%q}`, e.SeqNr, payload); string(e.Payload) != want {
				return fmt.Errorf("event %d: payload %.40s..., want %.40s...", e.SeqNr, e.Payload, want)
			}
			got = append(got, e.SeqNr)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	recs := h.records(0, 0)
	errs, err := h.rep.Write(h.ctx, recs)
	if err == nil {
		t.Fatalf("Write of %d records (400 kB of events) on a full disk succeeded", len(recs))
	}
	if errs != nil {
		t.Errorf("a full disk gave per-record verdicts: %v", errs)
	}
	if !errors.Is(err, sqlstore.ErrDiskFull) || !plugins.IsTransient(err) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Write on a full disk: %v; want a transient error naming %s and the full disk", err, path)
	}
	if _, ok, _ := h.store.s.Pointer(h.ctx, h.topic, 0); ok {
		t.Fatal("the pointer moved past records that were not stored")
	}
	// Reads still answer (from Kafka).
	if got := read(); len(got) != 400 {
		t.Fatalf("read %d events while the store is full, want 400", len(got))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if errs, err := h.rep.Write(h.ctx, recs); err != nil || errs == nil {
		t.Fatalf("Write once there is room: %v %v", errs, err)
	}
	got := read()
	if len(got) != 400 || got[0] != 1 || got[399] != 400 {
		t.Fatalf("read %d events after the disk had room again, want 1..400", len(got))
	}
}
