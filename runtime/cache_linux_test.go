package runtime_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// fullDiskEnv tells the test binary it runs as TestCacheOnFullDisk's child,
// in its own user and mount namespace.
const fullDiskEnv = "STREAMD_TEST_FULLDISK_CHILD"

// TestCacheOnFullDisk: with the
// compile cache on a full disk (a 2 MiB tmpfs filled to the last byte) a
// plugin still loads and runs, without the cache, and the warning names
// the cache and ENOSPC; it used to fail to load as "not a valid
// WebAssembly module". Once there is room again, the next load fills the
// cache. The tmpfs is mounted in a user and mount namespace of a child
// process, so the test needs no privilege and leaves no mount behind.
func TestCacheOnFullDisk(t *testing.T) {
	plugin := os.Getenv(fullDiskEnv) // the child loads what the parent built
	if plugin == "" {
		plugin = probePlugin(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCacheOnFullDisk$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), fullDiskEnv+"="+plugin)
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			// Could not start in new namespaces (user namespaces
			// disabled).
			testenv.Missing(t, "user and mount namespaces for a tmpfs: "+err.Error())
		}
		if strings.Contains(string(out), "MISSING:") {
			testenv.Missing(t, strings.TrimSpace(string(out)))
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestCacheOnFullDisk") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}

	// The child: root of its own user namespace, with a mount namespace
	// whose mounts nobody else sees.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		t.Fatalf("MISSING: make / private in the new mount namespace: %v", err)
	}
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=2m"); err != nil {
		t.Fatalf("MISSING: mount a tmpfs: %v", err)
	}
	defer testenv.Check(t, func() error { return syscall.Unmount(disk, syscall.MNT_DETACH) })
	cache := filepath.Join(disk, "wasm-cache")
	filler := filepath.Join(disk, "filler")
	fill(t, filler)

	m, log, err := loadLogged(t, plugin, cache)
	if err != nil {
		t.Fatalf("load with the cache on a full disk: %v", err)
	}
	if !strings.Contains(log, "no space left on device") || !strings.Contains(log, cache) || !strings.Contains(log, "running without it") {
		t.Errorf("warning %q does not name the cache %s and ENOSPC", log, cache)
	}
	t.Logf("on the full disk: %s", log)
	if out := probe(t, m, "args")[0]; out != "ok:0 0" {
		t.Errorf("the plugin loaded without the cache answers %s", out)
	}

	// Room again: the next load writes the cache and warns no more.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, log, err := loadLogged(t, plugin, cache); err != nil || log != "" {
		t.Fatalf("load after the disk was freed: %v; log %q", err, log)
	}
	if files := cacheFiles(t, cache); len(files) < 2 { // a compiled module and a fuel copy
		t.Errorf("the cache holds %v after a load with room", files)
	}
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(f.Close) // written until the disk is full
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for n := 4096; n > 0; n /= 2 { // the last bytes of a partly used page
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
}
