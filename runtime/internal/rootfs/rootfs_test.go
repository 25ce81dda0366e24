package rootfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// The guest-level tests are runtime/sandbox_test.go (a Wasm guest makes
// the calls through WASI); these cover what wasi-libc does not reach.

func grant(t *testing.T, readOnly bool) (*FS, string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "grant")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"grant/f": "inside", "outside": "OUTSIDE"} {
		if err := os.WriteFile(filepath.Join(base, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../outside", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "in")); err != nil {
		t.Fatal(err)
	}
	f, err := Open(dir, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Cleanup(t, f.Close)
	return f, base
}

// TestRemoveKinds: Rmdir removes only directories and Unlink only what is
// not one (a link to a directory is not one), as WASI's path_remove_directory
// and path_unlink_file ask.
func TestRemoveKinds(t *testing.T) {
	f, base := grant(t, false)
	if err := os.Symlink("sub", filepath.Join(base, "grant", "dirlink")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		call string
		p    string
		want experimentalsys.Errno
	}{
		{"Rmdir", "f", experimentalsys.ENOTDIR},
		{"Rmdir", "dirlink", experimentalsys.ENOTDIR},
		{"Unlink", "sub", experimentalsys.EISDIR},
		{"Rmdir", "missing", experimentalsys.ENOENT},
		{"Unlink", "missing", experimentalsys.ENOENT},
		{"Unlink", "f", 0},
		{"Unlink", "dirlink", 0},
		{"Rmdir", "sub", 0},
	} {
		remove := f.Unlink
		if tt.call == "Rmdir" {
			remove = f.Rmdir
		}
		if got := remove(tt.p); got != tt.want {
			t.Errorf("%s(%q) = %v, want %v", tt.call, tt.p, got, tt.want)
		}
	}
	for _, name := range []string{"f", "dirlink", "sub"} {
		if _, err := os.Lstat(filepath.Join(base, "grant", name)); !os.IsNotExist(err) {
			t.Errorf("%s still there after its removal: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(base, "grant", "in")); !os.IsNotExist(err) {
		t.Errorf("the link to f still resolves after f was unlinked: %v", err)
	}
}

func TestSymlinkTargets(t *testing.T) {
	f, _ := grant(t, false)
	for _, tt := range []struct {
		target, link string
		want         experimentalsys.Errno
	}{
		{"f", "l1", 0},
		{"../f", "sub/l2", 0},
		{"sub/../f", "l3", 0},
		{"..", "l4", experimentalsys.EPERM},
		{"../outside", "l5", experimentalsys.EPERM},
		{"../../outside", "sub/l6", experimentalsys.EPERM},
		{"sub/../../outside", "l7", experimentalsys.EPERM},
		{"/etc", "l8", experimentalsys.EPERM},
		{"", "l9", experimentalsys.EPERM},
		{"f", "../l10", experimentalsys.EPERM}, // the link itself outside
	} {
		if got := f.Symlink(tt.target, tt.link); got != tt.want {
			t.Errorf("Symlink(%q, %q) = %v, want %v", tt.target, tt.link, got, tt.want)
		}
	}
}

func TestNoFollow(t *testing.T) {
	f, _ := grant(t, false)
	if _, e := f.OpenFile("in", experimentalsys.O_RDONLY|experimentalsys.O_NOFOLLOW, 0); e != experimentalsys.ELOOP {
		t.Errorf("O_NOFOLLOW on a link: %v, want ELOOP", e)
	}
	file, e := f.OpenFile("f", experimentalsys.O_RDONLY|experimentalsys.O_NOFOLLOW, 0)
	if e != 0 {
		t.Fatalf("O_NOFOLLOW on a file: %v", e)
	}
	if e := file.Close(); e != 0 {
		t.Fatal(e)
	}
	file, e = f.OpenFile("new", experimentalsys.O_WRONLY|experimentalsys.O_CREAT|experimentalsys.O_NOFOLLOW, 0o644)
	if e != 0 {
		t.Fatalf("O_NOFOLLOW|O_CREAT of a new file: %v", e)
	}
	if e := file.Close(); e != 0 {
		t.Fatal(e)
	}
}

func TestUtimensThroughLinkOut(t *testing.T) {
	f, base := grant(t, false)
	outside := filepath.Join(base, "outside")
	before, _ := os.Stat(outside)
	if e := f.Utimens("out", 0, 0); e == 0 {
		t.Error("Utimens through a link that points out succeeded")
	}
	after, _ := os.Stat(outside)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the file outside changed: %v, then %v", before.ModTime(), after.ModTime())
	}
	// Inside, through a link, it works.
	if e := f.Utimens("in", 0, 0); e != 0 {
		t.Fatalf("Utimens(in): %v", e)
	}
	if fi, _ := os.Stat(filepath.Join(base, "grant", "f")); !fi.ModTime().Equal(time.Unix(0, 0)) {
		t.Errorf("mtime %v, want the epoch", fi.ModTime())
	}
}

func TestSetAppend(t *testing.T) {
	f, base := grant(t, false)
	file, e := f.OpenFile("f", experimentalsys.O_WRONLY, 0)
	if e != 0 {
		t.Fatal(e)
	}
	defer func() { _ = file.Close() }() // opened to be refused writes
	if e := file.SetAppend(true); e != 0 {
		t.Fatalf("SetAppend: %v", e)
	}
	if _, e := file.Write([]byte("+")); e != 0 {
		t.Fatal(e)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "grant", "f")); string(b) != "inside+" {
		t.Fatalf("file holds %q", b)
	}
}

func TestReadOnly(t *testing.T) {
	f, base := grant(t, true)
	for _, flag := range []experimentalsys.Oflag{
		experimentalsys.O_WRONLY, experimentalsys.O_RDWR, experimentalsys.O_RDONLY | experimentalsys.O_APPEND,
		experimentalsys.O_RDONLY | experimentalsys.O_CREAT, experimentalsys.O_RDONLY | experimentalsys.O_TRUNC,
	} {
		if _, e := f.OpenFile("f", flag, 0o644); e != experimentalsys.EROFS {
			t.Errorf("OpenFile(f, %#x) = %v, want EROFS", flag, e)
		}
	}
	file, e := f.OpenFile("f", experimentalsys.O_RDONLY, 0)
	if e != 0 {
		t.Fatal(e)
	}
	defer func() { _ = file.Close() }() // opened read-only
	if e := file.Utimens(0, 0); e != experimentalsys.EROFS {
		t.Errorf("Utimens on a read-only file: %v", e)
	}
	if e := file.Truncate(0); e != experimentalsys.EROFS {
		t.Errorf("Truncate on a read-only file: %v", e)
	}
	if e := file.SetAppend(true); e != experimentalsys.EROFS {
		t.Errorf("SetAppend on a read-only file: %v", e)
	}
	for name, e := range map[string]experimentalsys.Errno{
		"Mkdir": f.Mkdir("d", 0o755), "Rename": f.Rename("f", "g"), "Rmdir": f.Rmdir("sub"),
		"Unlink": f.Unlink("f"), "Link": f.Link("f", "g"), "Symlink": f.Symlink("f", "g"),
		"Utimens": f.Utimens("f", 0, 0),
	} {
		if e != experimentalsys.EROFS {
			t.Errorf("%s on a read-only grant: %v", name, e)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(base, "grant", "f")); string(b) != "inside" {
		t.Fatalf("file holds %q", b)
	}
}

// FuzzNoEscape: whatever paths a guest names (wazero cleans them first;
// this does not rely on it), no call reaches the file or directory
// outside the grant: nothing opened or stat'ed is one of them, and they are
// left as they were.
func FuzzNoEscape(f *testing.F) {
	for _, s := range [][2]string{
		{"out", "x"}, {"../outside", "x"}, {"sub/../../outside", "in"}, {"/etc/passwd", "x"},
		{"in", "sub/../out"}, {"sub", "out/x"}, {"..", "."}, {"out/", "sub//x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, q string) {
		fsys, base := grant(t, false)
		outside := filepath.Join(base, "outside")
		if err := os.Mkdir(filepath.Join(base, "outdir"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../outdir", filepath.Join(base, "grant", "outd")); err != nil {
			t.Fatal(err)
		}
		outs := []string{outside, filepath.Join(base, "outdir"), base}
		var outInfo []os.FileInfo
		for _, o := range outs {
			fi, err := os.Stat(o)
			if err != nil {
				t.Fatal(err)
			}
			outInfo = append(outInfo, fi)
		}
		isOut := func(dev, ino uint64) bool {
			for _, fi := range outInfo {
				if s, ok := sameIno(fi, dev, ino); ok && s {
					return true
				}
			}
			return false
		}
		check := func(what string) {
			if st, e := fsys.Stat(p); e == 0 && isOut(st.Dev, st.Ino) {
				t.Fatalf("%s: Stat(%q) reached outside", what, p)
			}
			if file, e := fsys.OpenFile(p, experimentalsys.O_RDONLY, 0); e == 0 {
				st, _ := file.Stat()
				_ = file.Close() // read only
				if isOut(st.Dev, st.Ino) {
					t.Fatalf("%s: OpenFile(%q) reached outside", what, p)
				}
			}
		}
		check("before")
		// Each attempt may succeed or fail; either way, check says nothing
		// reached outside, which is the point.
		_ = fsys.Symlink(q, p)
		check("after Symlink")
		_ = fsys.Link(q, p)
		_ = fsys.Rename(q, p)
		check("after Link and Rename")
		if file, e := fsys.OpenFile(p, experimentalsys.O_WRONLY|experimentalsys.O_CREAT|experimentalsys.O_APPEND, 0o644); e == 0 {
			_, _ = file.Write([]byte("x"))
			_ = file.Close()
		}
		_ = fsys.Mkdir(p, 0o755)
		_ = fsys.Utimens(p, 0, 0)
		_ = fsys.Unlink(q)
		_ = fsys.Rmdir(q)
		if b, err := os.ReadFile(outside); err != nil || string(b) != "OUTSIDE" {
			t.Fatalf("p %q q %q: the file outside holds %q (%v)", p, q, b, err)
		}
		if fi, err := os.Stat(outside); err != nil || !fi.ModTime().Equal(outInfo[0].ModTime()) {
			t.Fatalf("p %q q %q: the file outside changed: %v", p, q, err)
		}
		if ents, _ := os.ReadDir(filepath.Join(base, "outdir")); len(ents) != 0 {
			t.Fatalf("p %q q %q: something was made outside: %v", p, q, ents)
		}
		ents, _ := os.ReadDir(base)
		if len(ents) != 3 { // grant, outside, outdir
			t.Fatalf("p %q q %q: something was made next to the grant: %v", p, q, ents)
		}
	})
}
