package plugincli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/cli/plugincli"
	"github.com/streamd/streamd/internal/tests/testenv"
)

// rustWeb is where scripts/install-tools rust-web puts the modern Rust.
func rustWeb() string {
	if d := os.Getenv("STREAMD_RUST_WEB"); d != "" {
		return d
	}
	return "/opt/streamd-rust-web"
}

// rustupPath is rustup's path: on PATH, or where its installer puts it.
func rustupPath() string {
	if p, err := exec.LookPath("rustup"); err == nil {
		return p
	}
	home, _ := os.UserHomeDir()
	if p := filepath.Join(home, ".cargo", "bin", "rustup"); fileExists(p) {
		return p
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestRustToolchains: the Rust project of `plugin new` builds and passes
// its test with each Rust an author may have: Debian's rustc 1.63 with its
// wasm32-wasi std, the rustc-web 1.96 of scripts/install-tools rust-web,
// and rustup with a toolchain that has wasm32-wasip1 (that same rustc-web,
// linked into a rustup of the test's own: rustup's download server is not
// reachable here, so its stable cannot add the target); with a rustup
// toolchain without the target, or with no Rust at all, build.sh says in
// one line what is missing and the command that installs it.
func TestRustToolchains(t *testing.T) {
	bin, err := buildStreamd()
	if err != nil {
		t.Fatal(err)
	}
	sdk, _ := filepath.Abs("../../../sdk")
	root := t.TempDir()
	none := filepath.Join(root, "none") // a toolchain directory that is not there
	// A PATH with the tools build.sh uses and no Rust.
	tools := filepath.Join(root, "tools")
	if err := os.MkdirAll(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"sh", "dirname", "ls", "grep", "cp", "wc", "cat"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(tools, tool)); err != nil {
			t.Fatal(err)
		}
	}
	rustup := rustupPath()
	// rustupHome makes a RUSTUP_HOME whose default toolchain is dir
	// (rustup toolchain link).
	rustupHome := func(t *testing.T, name, dir string) string {
		home := filepath.Join(root, "rustup-"+name)
		for _, args := range [][]string{{"toolchain", "link", name, dir}, {"default", name}} {
			cmd := exec.Command(rustup, args...)
			cmd.Env = append(os.Environ(), "RUSTUP_HOME="+home)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("rustup %v: %v\n%s", args, err, out)
			}
		}
		return home
	}
	debian := fileExists("/usr/bin/cargo") && fileExists("/usr/bin/rustc") && len(globs("/usr/lib/rustlib/wasm32-wasi*/lib/libstd-*.rlib")) > 0
	web := fileExists(filepath.Join(rustWeb(), "bin", "cargo"))
	cargoBin := ""
	if rustup != "" {
		cargoBin = filepath.Dir(rustup)
	}

	for _, tt := range []struct {
		name  string
		needs map[string]bool // what the case needs: its name -> there
		env   func(t *testing.T) []string
		// want: in the build's last line, or (fail) its one line on stderr
		want string
		fail bool
	}{
		{"debian", map[string]bool{"Debian's cargo, rustc and libstd-rust-dev-wasm32 (scripts/install-tools wasm)": debian},
			func(*testing.T) []string { return []string{"PATH=/usr/bin:/bin", "STREAMD_RUST_WEB=" + none} },
			"with rustc 1.63.0 for wasm32-wasi", false},
		{"rust-web", map[string]bool{"rustc-web in " + rustWeb() + " (scripts/install-tools rust-web)": web},
			func(*testing.T) []string { return []string{"PATH=/usr/bin:/bin", "STREAMD_DEBIAN_RUST=" + none} },
			"with rustc 1.96.0", false},
		{"rustup with wasm32-wasip1", map[string]bool{"rustup": rustup != "", "rustc-web in " + rustWeb() + " (scripts/install-tools rust-web)": web},
			func(t *testing.T) []string {
				return []string{"PATH=" + cargoBin + ":/usr/bin:/bin", "RUSTUP_HOME=" + rustupHome(t, "web", rustWeb()),
					"STREAMD_RUST_WEB=" + none, "STREAMD_DEBIAN_RUST=" + none}
			},
			"with rustc 1.96.0", false},
		{"rustup without wasm32-wasip1", map[string]bool{"rustup": rustup != "", "Debian's rustc": debian},
			func(t *testing.T) []string {
				// Debian's rustc as rustup's toolchain: it has no
				// wasm32-wasip1 std (its target is wasm32-wasi).
				return []string{"PATH=" + cargoBin + ":" + tools, "RUSTUP_HOME=" + rustupHome(t, "deb", "/usr"),
					"STREAMD_RUST_WEB=" + none, "STREAMD_DEBIAN_RUST=" + none}
			},
			"build.sh: rustc 1.63.0 has no wasm32-wasip1 standard library: run: rustup target add wasm32-wasip1", true},
		{"no Rust", nil,
			func(*testing.T) []string {
				return []string{"PATH=" + tools, "STREAMD_RUST_WEB=" + none, "STREAMD_DEBIAN_RUST=" + none}
			},
			"build.sh: no Rust that builds for Wasm (no cargo, no rustc): run: sudo apt-get install cargo rustc libstd-rust-dev-wasm32", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for what, there := range tt.needs {
				if !there {
					testenv.Missing(t, what)
				}
			}
			if tt.fail && tt.name == "no Rust" && !fileExists("/etc/debian_version") {
				tt.want = "build.sh: no Rust that builds for Wasm (no cargo, no rustc): install rustup"
			}
			dir := filepath.Join(root, strings.ReplaceAll(tt.name, " ", "-"))
			var o, e bytes.Buffer
			if code := plugincli.Main(context.Background(), []string{"new", "--lang", "rust", "--kind", "transform", "--sdk", sdk, "--dir", dir, "upper"}, &o, &e, plugincli.OpenDefault); code != 0 {
				t.Fatalf("plugin new: exit %d\n%s%s", code, o.String(), e.String())
			}
			cmd := exec.Command(filepath.Join(dir, "build.sh"))
			env := []string{"HOME=" + os.Getenv("HOME")}
			if h := os.Getenv("CARGO_HOME"); h != "" {
				env = append(env, "CARGO_HOME="+h)
			}
			cmd.Env = append(env, tt.env(t)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if tt.fail {
				msg := strings.TrimSpace(stderr.String())
				if err == nil || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, tt.want) {
					t.Fatalf("build.sh: %v\nstderr %q\nwant one line starting %q", err, msg, tt.want)
				}
				t.Logf("build.sh says: %s", msg)
				return
			}
			last := strings.TrimSpace(stdout.String())
			if i := strings.LastIndex(last, "\n"); i >= 0 {
				last = last[i+1:]
			}
			if err != nil || !strings.Contains(last, tt.want) {
				t.Fatalf("build.sh: %v, last line %q, want %q in it\n%s%s", err, last, tt.want, stdout.String(), stderr.String())
			}
			t.Logf("build.sh: %s", last)
			test := exec.Command(filepath.Join(bin, "streamd"), "plugin", "test", "plugin.wasm", "--input", "testdata/in.jsonl", "--expect", "testdata/out.jsonl", "--cache", "")
			test.Dir = dir
			if out, err := test.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "ok plugin.wasm: ") {
				t.Fatalf("plugin test: %v\n%s", err, out)
			}
		})
	}
}

func globs(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}
