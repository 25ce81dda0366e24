//go:build unix

package kafka

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaimInstanceIDWriteFails: a slot whose new ID cannot be written (a
// full disk, a read-only mount; here a slot that is /dev/null, which
// opens, locks and reads empty but cannot be truncated) fails the claim
// with the slot's path, instead of returning an ID that was not kept (the
// next start then claimed another one, and waited the session timeout for
// its partitions).
func TestClaimInstanceIDWriteFails(t *testing.T) {
	if _, err := os.Stat(os.DevNull); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gdir := filepath.Join(dir, groupDirName("g"))
	if err := os.MkdirAll(gdir, 0o755); err != nil {
		t.Fatal(err)
	}
	slot := filepath.Join(gdir, "0.id")
	if err := os.Symlink(os.DevNull, slot); err != nil {
		t.Fatal(err)
	}
	id, release, err := ClaimInstanceID(dir, "g")
	if err == nil {
		release()
		t.Fatalf("claimed %q from a slot that cannot be written; want an error", id)
	}
	if !strings.Contains(err.Error(), "write instance id slot "+slot) {
		t.Fatalf("error %q; want the failed write of slot %s", err, slot)
	}
	if id != "" || release != nil {
		t.Errorf("a failed claim returned id %q, release %v", id, release != nil)
	}
	t.Log(err)
}
