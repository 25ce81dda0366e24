package runtime_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
)

var probeBuild struct {
	once sync.Once
	path string
	err  error
}

// probePlugin builds testdata/wasiprobe.c (a hostile guest that runs the
// WASI calls named in its records) with the C SDK, once per test binary.
func probePlugin(tb testing.TB) string {
	tb.Helper()
	testenv.Tool(tb, "clang")
	probeBuild.once.Do(func() {
		probeBuild.path = filepath.Join(tmpRoot, "wasiprobe.wasm")
		cmd := exec.Command("sh", filepath.Join("..", "examples", "wasm", "c", "build-plugin.sh"),
			probeBuild.path, filepath.Join("testdata", "wasiprobe.c"))
		if out, err := cmd.CombinedOutput(); err != nil {
			probeBuild.err = fmt.Errorf("build wasiprobe: %v\n%s", err, out)
			if strings.Contains(string(out), "sysroot is missing") {
				probeBuild.err = nil
				probeBuild.path = ""
			}
		}
	})
	if probeBuild.err != nil {
		tb.Fatal(probeBuild.err)
	}
	if probeBuild.path == "" {
		testenv.Missing(tb, "wasi-libc (run scripts/install-tools)")
	}
	return probeBuild.path
}

// probe runs the commands in one batch and returns the guest's answers.
func probe(tb testing.TB, m *runtime.Module, cmds ...string) []string {
	tb.Helper()
	rs := make([]record.Record, len(cmds))
	for i, c := range cmds {
		rs[i] = record.Record{Value: []byte(c), Partition: -1, Offset: -1}
	}
	res, err := m.Call(context.Background(), runtime.OpTransform, rs)
	if err != nil {
		tb.Fatalf("%q: %v", cmds, err)
	}
	out := make([]string, len(res))
	for i, r := range res {
		if r.Err != nil || len(r.Records) != 1 {
			tb.Fatalf("%q: result %+v", cmds[i], r)
		}
		out[i] = string(r.Records[0].Value)
	}
	return out
}

// sandbox is a directory tree for the sandbox tests: base/outside holds
// what no guest may reach; base/grant is the granted directory, which holds
// links that point out (as an operator, another program or an earlier
// guest could have left them).
type sandbox struct {
	base, grant, outside string
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	base := t.TempDir()
	s := &sandbox{base: base, grant: filepath.Join(base, "grant"), outside: filepath.Join(base, "outside")}
	files := map[string]string{
		"outside/secret":      "OUTSIDE-SECRET",
		"outside/sub/deep":    "OUTSIDE-DEEP",
		"grant/inside.txt":    "inside",
		"grant/d/secret":      "inside-d",
		"grant/r/secret":      "inside-r",
		"grant/ro/readme.txt": "read me",
	}
	for name, data := range files {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"abs":     s.outside,                          // absolute, to a directory outside
		"absfile": filepath.Join(s.outside, "secret"), // absolute, to a file outside
		"rel":     "../outside",                       // relative, above the grant
		"relfile": "../outside/secret",                // relative, to a file above the grant
		"hop":     "rel/secret",                       // inside, to a link that points out
		"etc":     "/etc",                             // the host's /etc
		"ok":      "inside.txt",                       // inside: must keep working
		"dirlink": "d",                                // inside, to a directory
		"r.out":   "../outside",                       // swapped for r by the race test
		"d/up":    "../inside.txt",                    // up, but still inside
		"d/out":   "../../outside/secret",             // up and out
		"ro/out":  filepath.Join(s.outside, "secret"), // in the read-only grant
		"ro/in":   "readme.txt",                       // in the read-only grant, inside
		"ro/up":   "../inside.txt",                    // out of the read-only grant into the other
		"deep":    strings.Repeat("d/../", 3) + "..",  // up through a detour
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(s.grant, name)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// snapshot describes every file under dir (except the subtree skip): path,
// type, size, mode, modification time, link target and content hash.
func snapshot(t *testing.T, dir, skip string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		snap[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, b := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("%s: %s was removed", what, p)
		} else if a != b {
			t.Errorf("%s: %s changed: %s, then %s", what, p, b, a)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: %s was created", what, p)
		}
	}
}

// leaked reports whether a guest's answer holds anything from outside the
// grant.
func leaked(out string) bool {
	return strings.Contains(out, "OUTSIDE") || strings.Contains(out, "root:")
}

// TestSandboxEscapes: a hostile guest tries every way
// out of a granted directory that WASI preview 1 offers: links already in
// the grant that point out (absolute, relative, to files and directories,
// chains), links it makes itself, hard links, `..`, renames that move files
// in or out, a descriptor whose directory it swaps for a link, O_NOFOLLOW,
// and metadata calls (stat, utimes, readdir). Nothing outside the grant may
// be read, written, created, moved, linked or touched, while everything
// inside keeps working.
func TestSandboxEscapes(t *testing.T) {
	s := newSandbox(t)
	m := load(t, probePlugin(t), plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Dirs: map[string]string{"/data": s.grant}}})
	before := snapshot(t, s.base, s.grant)

	const (
		anyOK  = "ok"  // succeeds, with any answer
		anyErr = "err" // fails, with any error
		either = ""    // may succeed or fail, as long as nothing leaks
	)
	fd := ""
	steps := []struct{ cmd, want string }{
		// The grant works.
		{"read /data/inside.txt", "ok:inside"},
		{"read /data/ok", "ok:inside"},
		{"read /data/dirlink/secret", "ok:inside-d"},
		{"read /data/d/up", "ok:inside"},
		{"write /data/new.txt hello", "ok:5"},
		{"read /data/new.txt", "ok:hello"},
		{"mkdir /data/newdir", anyOK},
		{"write /data/newdir/f x", anyOK},
		{"rename /data/newdir/f /data/g", anyOK},
		{"read /data/g", "ok:x"},
		{"unlink /data/g", anyOK},
		{"rmdir /data/newdir", anyOK},
		{"readlink /data/abs", "ok:" + s.outside}, // reading a link's text is not following it
		{"lstat /data/abs", anyOK},

		// Links already in the grant that point out.
		{"read /data/abs/secret", anyErr},
		{"read /data/absfile", anyErr},
		{"read /data/rel/secret", anyErr},
		{"read /data/relfile", anyErr},
		{"read /data/hop", anyErr},
		{"read /data/d/out", anyErr},
		{"read /data/deep/outside/secret", anyErr},
		{"read /data/etc/passwd", anyErr},
		{"stat /data/abs/secret", anyErr},
		{"stat /data/relfile", anyErr},
		{"ls /data/abs", anyErr},
		{"ls /data/rel/sub", anyErr},
		{"write /data/abs/planted x", anyErr},
		{"write /data/relfile x", anyErr},
		{"append /data/absfile x", anyErr},
		{"trunc /data/relfile", anyErr},
		{"create /data/rel/created", anyErr},
		{"mkdir /data/abs/newdir", anyErr},
		{"unlink /data/abs/secret", anyErr},
		{"rmdir /data/rel/sub", anyErr},
		{"utime /data/absfile", anyErr},
		{"utime /data/rel/secret", anyErr},
		{"readnf /data/ok", anyErr}, // O_NOFOLLOW on a link inside fails too (ELOOP)
		{"readnf /data/inside.txt", "ok:inside"},

		// `..`.
		{"read /data/../outside/secret", anyErr},
		{"read /data/d/../../outside/secret", anyErr},
		{"write /data/../outside/planted x", anyErr},
		{"mkdir /data/../planted", anyErr},
		{"ls /data/..", anyErr},

		// Links the guest makes.
		{"symlink ../outside /data/mine", anyErr},
		{"symlink " + s.outside + " /data/mine2", anyErr},
		{"symlink d/../.. /data/mine3", anyErr},
		{"symlink ../../outside /data/d/mine4", anyErr},
		{"read /data/mine/secret", anyErr},
		{"read /data/mine2/secret", anyErr},
		{"read /data/d/mine4/secret", anyErr},
		{"symlink inside.txt /data/mine5", anyOK},
		{"read /data/mine5", "ok:inside"},
		{"symlink ../inside.txt /data/d/mine6", anyOK},
		{"read /data/d/mine6", "ok:inside"},

		// Hard links.
		{"link /data/abs/secret /data/hl1", anyErr},
		{"link /data/rel/secret /data/hl2", anyErr},
		{"link /data/../outside/secret /data/hl3", anyErr},
		{"link /data/absfile /data/hl4", either}, // at most a link to the link
		{"read /data/hl4", anyErr},
		{"link /data/relfile /data/hl5", either},
		{"read /data/hl5", anyErr},
		{"link /data/inside.txt /data/hl6", anyOK},
		{"read /data/hl6", "ok:inside"},

		// Renames that move things in or out.
		{"rename /data/abs/secret /data/stolen", anyErr},
		{"rename /data/rel/sub /data/stolendir", anyErr},
		{"rename /data/inside.txt /data/abs/moved", anyErr},
		{"rename /data/new.txt /data/rel/moved", anyErr},

		// A rename race the guest runs itself: it opens d, swaps d for a
		// link that points out, and uses the descriptor.
		{"opendir /data/d", anyOK},
		{"rename /data/d /data/d.real", anyOK},
		{"rename /data/rel /data/d", anyOK},
		{"readat $FD secret", either},
		{"writeat $FD planted x", either},
		{"read /data/d/secret", anyErr},
		{"rename /data/d /data/rel", anyOK},
		{"rename /data/d.real /data/d", anyOK},
		{"readat $FD secret", either},
		{"close $FD", anyOK},
	}
	for _, st := range steps {
		cmd := strings.ReplaceAll(st.cmd, "$FD", fd)
		out := probe(t, m, cmd)[0]
		if strings.HasPrefix(cmd, "opendir ") {
			fd = strings.TrimPrefix(out, "ok:")
		}
		switch {
		case leaked(out):
			t.Errorf("%s: the guest reached outside its grant: %s", cmd, out)
		case st.want == anyOK && !strings.HasPrefix(out, "ok"),
			st.want == anyErr && !strings.HasPrefix(out, "err:"),
			st.want != anyOK && st.want != anyErr && st.want != either && out != st.want:
			t.Errorf("%s: %s, want %s", cmd, out, st.want)
		}
	}

	sameSnapshot(t, "outside the grant", before, snapshot(t, s.base, s.grant))
	// No file in the grant may be a hard link to a file outside it.
	outside := map[string]os.FileInfo{}
	for p := range before {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			outside[p] = fi
		}
	}
	if err := filepath.WalkDir(s.grant, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		for q, o := range outside {
			if os.SameFile(fi, o) {
				t.Errorf("%s is a hard link to %s, outside the grant", p, q)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("walking the grant: %v", err)
	}
}

// TestSandboxRenameRace: while the guest reads
// d/secret again and again, another process swaps d between a directory in
// the grant and a link that points out of it. Every read must get the file
// inside or an error, never the one outside: the check that a path stays in
// the grant and its use must be one step.
func TestSandboxRenameRace(t *testing.T) {
	s := newSandbox(t)
	m := load(t, probePlugin(t), plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Dirs: map[string]string{"/data": s.grant}}})
	r, real, link := filepath.Join(s.grant, "r"), filepath.Join(s.grant, "r.real"), filepath.Join(s.grant, "r.out")

	var stop atomic.Bool
	var swaps atomic.Int64
	done := make(chan error, 1)
	go func() {
		for !stop.Load() {
			for _, mv := range [][2]string{{r, real}, {link, r}, {r, link}, {real, r}} {
				if err := os.Rename(mv[0], mv[1]); err != nil {
					done <- err
					return
				}
			}
			swaps.Add(1)
		}
		done <- nil
	}()
	defer func() {
		stop.Store(true)
		if err := <-done; err != nil {
			t.Errorf("swap: %v", err)
		}
	}()

	// Read until both sides of the race were seen (the guest read the
	// directory, and read while it was not there), or 20 s.
	var sawInside, sawOther bool
	deadline := time.Now().Add(20 * time.Second)
	for rounds := 0; !(sawInside && sawOther) || rounds < 3; rounds++ {
		if time.Now().After(deadline) {
			t.Fatalf("after %d rounds (%d swaps) the reads never met the swap (inside %v, other %v)",
				rounds, swaps.Load(), sawInside, sawOther)
		}
		out := probe(t, m, "race 2000 /data/r/secret")[0]
		for _, o := range strings.Split(strings.TrimPrefix(out, "ok:"), "|") {
			switch {
			case leaked(o):
				t.Fatalf("round %d: a read reached outside the grant: %s (all outcomes: %s)", rounds, o, out)
			case o == "ok:inside-r":
				sawInside = true
			default:
				sawOther = true
			}
		}
	}
}

// TestSandboxReadOnly: a grant whose host path ends in ":ro" can be read
// and nothing in it can be changed: no write, create, truncate, mkdir,
// unlink, rename, link, symlink or utimes, whatever the open flags. A link
// from it into another grant is not followed either.
func TestSandboxReadOnly(t *testing.T) {
	s := newSandbox(t)
	ro := filepath.Join(s.grant, "ro")
	m := load(t, probePlugin(t), plugins.Options{Pool: 1, Wasm: plugins.WasmOptions{Dirs: map[string]string{"/ro": ro + ":ro", "/data": s.grant}}})
	before := snapshot(t, s.base, "")
	for _, st := range []struct{ cmd, want string }{
		{"read /ro/readme.txt", "ok:read me"},
		{"read /ro/in", "ok:read me"},
		{"ls /ro", anyLs},
		{"stat /ro/readme.txt", "ok:7"},
		{"read /ro/out", "err"},
		{"read /ro/up", "err"}, // into the other grant: each grant is its own root
		{"read /data/inside.txt", "ok:inside"},
		{"write /ro/readme.txt x", "err"},
		{"append /ro/readme.txt x", "err"},
		{"write /ro/new x", "err"},
		{"create /ro/created", "err"},
		{"trunc /ro/readme.txt", "err"},
		{"mkdir /ro/dir", "err"},
		{"unlink /ro/readme.txt", "err"},
		{"rename /ro/readme.txt /ro/moved", "err"},
		{"link /ro/readme.txt /ro/hl", "err"},
		{"symlink readme.txt /ro/sl", "err"},
		{"utime /ro/readme.txt", "err"},
		{"utime /ro", "err"},
	} {
		out := probe(t, m, st.cmd)[0]
		switch {
		case leaked(out):
			t.Errorf("%s: the guest reached outside its grant: %s", st.cmd, out)
		case st.want == anyLs:
			if !strings.HasPrefix(out, "ok:") || !strings.Contains(out, "readme.txt") {
				t.Errorf("%s: %s", st.cmd, out)
			}
		case st.want == "err" && !strings.HasPrefix(out, "err:"), st.want != "err" && out != st.want:
			t.Errorf("%s: %s, want %s", st.cmd, out, st.want)
		}
	}
	sameSnapshot(t, "the read-only grant and around it", before, snapshot(t, s.base, ""))
}

// TestDirGrantErrors: a grant that cannot be opened fails the load with an
// error naming the grant.
func TestDirGrantErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dirs map[string]string
		want string
	}{
		{map[string]string{"/x": filepath.Join(dir, "missing")}, "dirs: /x = " + filepath.Join(dir, "missing") + ": open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{map[string]string{"/x": filepath.Join(dir, "missing") + ":ro"}, "dirs: /x = " + filepath.Join(dir, "missing") + ":ro: open"},
		{map[string]string{"/x": file}, "dirs: /x = " + file + ": open " + file + ": not a directory"},
		{map[string]string{"/x": ":ro"}, `dirs: "/x" = ":ro": want a guest path and a host directory`},
		{map[string]string{"": dir}, `dirs: "" = "` + dir + `": want a guest path and a host directory`},
	} {
		_, err := newHost(t).Load(context.Background(), wat(t, "identity"), plugins.Options{Wasm: plugins.WasmOptions{Dirs: tt.dirs}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Dirs %v: %v, want %q", tt.dirs, err, tt.want)
		}
	}
}

const anyLs = "ls"
