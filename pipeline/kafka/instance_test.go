package kafka

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaimInstanceID: one ID per slot, the same one again once the slot
// is free (a restart), another while it is held (a second process), and a
// new one for a slot written on another host (a copied data dir).
func TestClaimInstanceID(t *testing.T) {
	if d := os.Getenv("CLAIM_CHILD"); d != "" { // the child process of the SIGKILL case below
		if _, _, err := ClaimInstanceID(d, "orders/g 1"); err != nil {
			fmt.Fprintln(os.Stderr, err) // the parent reads EOF
			os.Exit(1)
		}
		if _, err := os.Stdout.WriteString("claimed\n"); err != nil {
			os.Exit(1)
		}
		select {}
	}
	dir := t.TempDir()
	a, relA, err := ClaimInstanceID(dir, "orders/g 1")
	if err != nil {
		t.Fatal(err)
	}
	b, relB, err := ClaimInstanceID(dir, "orders/g 1")
	if err != nil {
		t.Fatal(err)
	}
	if a == b || !strings.Contains(a, "-0-") || !strings.Contains(b, "-1-") {
		t.Fatalf("two live claims got %q and %q", a, b)
	}
	other, relO, err := ClaimInstanceID(dir, "other")
	if err != nil || strings.Contains(other, "-1-") {
		t.Fatalf("another group: %q %v", other, err)
	}
	relO()
	relA()
	a2, relA2, err := ClaimInstanceID(dir, "orders/g 1")
	if err != nil || a2 != a {
		t.Fatalf("after release: %q, want slot 0's %q again (%v)", a2, a, err)
	}
	relA2()
	relB()

	// A process killed with SIGKILL releases its slot too: the kernel drops
	// the lock with the process.
	cmd := exec.Command(os.Args[0], "-test.run", "^TestClaimInstanceID$")
	cmd.Env = append(os.Environ(), "CLAIM_CHILD="+dir)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := out.Read(buf); err != nil {
		t.Fatalf("the child's claim: %v", err)
	}
	if c, rel, _ := ClaimInstanceID(dir, "orders/g 1"); c == a {
		t.Fatalf("claimed slot 0 while the child holds it")
	} else {
		rel()
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "killed"
	if c, rel, _ := ClaimInstanceID(dir, "orders/g 1"); c != a {
		t.Fatalf("after SIGKILL of the holder: %q, want %q", c, a)
	} else {
		rel()
	}

	// A slot file from another host gets a new ID.
	matches, _ := filepath.Glob(filepath.Join(dir, "orders_g_1-*", "0.id"))
	if len(matches) != 1 {
		t.Fatalf("slot files %v", matches)
	}
	if err := os.WriteFile(matches[0], []byte("streamd-otherhost-0-0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, rel, err := ClaimInstanceID(dir, "orders/g 1")
	if err != nil || c == a || strings.Contains(c, "otherhost") || !strings.Contains(c, "-0-") {
		t.Fatalf("copied slot: %q %v", c, err)
	}
	rel()
}
