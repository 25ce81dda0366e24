package dist

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// TestBinaryStatic: the binary is static (no interpreter, no shared
// library), built without cgo and with -trimpath, and says its version and
// commit.
func TestBinaryStatic(t *testing.T) {
	a := getArtifacts(t)
	f, err := elf.Open(a.bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an interpreter (PT_INTERP): not static", a.bin)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", a.bin, libs)
	}
	bi, err := buildinfo.ReadFile(a.bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	// (-trimpath leaves -ldflags out of the build info: the version line
	// below shows the -X stamps.)
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings %v", settings)
	}
	out, err := exec.Command(a.bin, "version").CombinedOutput()
	if want := fmt.Sprintf("streamd %s (commit %s, ", a.build.Version, a.build.Commit); err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("streamd version: %v %q, want %q...", err, out, want)
	}
}

// TestReproducible: building again (another folder, another time) gives
// the same bytes: the binary, both packages, the image and the chart.
func TestReproducible(t *testing.T) {
	a := getArtifacts(t)
	out := t.TempDir()
	bin := filepath.Join(out, "bin", "streamd")
	if err := a.build.Binary(runtime.GOARCH, bin); err != nil {
		t.Fatal(err)
	}
	// The starter copied, with other file times.
	starter := filepath.Join(out, "starter")
	if o, err := exec.Command("cp", "-r", a.starter, starter).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, o)
	}
	pkgs, err := a.build.Packages(runtime.GOARCH, bin, starter, out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := a.build.Image(runtime.GOARCH, bin, starter)
	if err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(out, "image.tar")
	if err := WriteImage(img, "streamd:"+a.build.ImageTag(), image, a.build.Epoch); err != nil {
		t.Fatal(err)
	}
	chart, err := a.build.Chart(filepath.Join(out, "chart"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{{a.bin, bin}, {a.deb, pkgs[0]}, {a.rpm, pkgs[1]}, {a.image, image}, {a.chart, chart}} {
		x, y := sum(t, p[0]), sum(t, p[1])
		if x != y {
			t.Errorf("%s: built again, %s is %x, was %x", filepath.Base(p[0]), filepath.Base(p[1]), y[:8], x[:8])
		}
	}
}

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestChartArchive: the packaged chart loads and carries the build's
// version as its version and appVersion.
func TestChartArchive(t *testing.T) {
	a := getArtifacts(t)
	ch, err := loader.LoadFile(a.chart)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != a.build.Version || ch.Metadata.AppVersion != a.build.Version || ch.Schema == nil || len(ch.Templates) < 8 {
		t.Errorf("chart %s %s (app %s), schema %v, %d templates", ch.Name(), ch.Metadata.Version, ch.Metadata.AppVersion, ch.Schema != nil, len(ch.Templates))
	}
}

// machine is a throwaway copy of this machine: an overlay over / (writes
// go to a tmpfs) in a mount namespace of its own, held by a process; its
// commands run chrooted in it. Nothing it does reaches the real machine.
type machine struct {
	t      *testing.T
	holder *exec.Cmd
	root   string // the overlay's mount point, in the namespace
}

func newMachine(t *testing.T) *machine {
	t.Helper()
	needRoot(t, "dpkg", "chroot", "systemd-analyze")
	dir := t.TempDir()
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "3600")
	holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	m := &machine{t: t, holder: holder, root: filepath.Join(dir, "m")}
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	})
	// Wait until the holder is in its own namespace.
	self, _ := os.Readlink("/proc/self/ns/mnt")
	for i := 0; ; i++ {
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", holder.Process.Pid))
		if ns != "" && ns != self {
			break
		}
		if i > 100 {
			t.Fatal("the namespace holder did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.host(`mkdir -p "$D" && mount -t tmpfs tmpfs "$D" && mkdir "$D/u" "$D/w" "$D/m" &&
mount -t overlay overlay -o lowerdir=/,upperdir="$D/u",workdir="$D/w" "$D/m" &&
mount --rbind /dev "$D/m/dev" && mount -t proc proc "$D/m/proc" && mount -t sysfs sys "$D/m/sys" &&
mount -t tmpfs tmpfs "$D/m/tmp" && mount -t tmpfs tmpfs "$D/m/run"`, "D="+dir)
	return m
}

// host runs a shell script in the namespace, outside the chroot.
func (m *machine) host(script string, env ...string) string {
	m.t.Helper()
	out, err := m.try(script, env...)
	if err != nil {
		m.t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return out
}

func (m *machine) try(script string, env ...string) (string, error) {
	cmd := exec.Command("nsenter", "--target", fmt.Sprint(m.holder.Process.Pid), "--mount", "--", "sh", "-c", script)
	cmd.Env = append(append(os.Environ(), "ROOT="+m.root), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// in runs a shell script chrooted in the machine, as root, with a clean
// environment.
func (m *machine) in(script string) string {
	m.t.Helper()
	out, err := m.tryIn(script)
	if err != nil {
		m.t.Fatalf("in the machine: %s: %v\n%s", script, err, out)
	}
	return out
}

func (m *machine) tryIn(script string) (string, error) {
	return m.try(`exec chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 /bin/sh -c "$S"`, "S="+script)
}

// copyIn puts a file of the real machine at /tmp/NAME in the machine.
func (m *machine) copyIn(path string) string {
	m.t.Helper()
	dst := "/tmp/" + filepath.Base(path)
	m.host(`cp "$F" "$ROOT$T"`, "F="+path, "T="+dst)
	return dst
}

// TestDebInstall: the .deb on a copy of this machine (Debian, as root), as
// an operator uses it, through install, an upgrade over an edited config,
// remove and purge, each leaving what Debian policy says.
func TestDebInstall(t *testing.T) {
	a := getArtifacts(t)
	m := newMachine(t)
	if out, _ := m.tryIn("dpkg-query -W streamd"); strings.Contains(out, "streamd\t") {
		t.Fatalf("streamd is already installed on this machine: %s", out)
	}
	if out, _ := m.tryIn("getent passwd streamd"); out != "" {
		t.Logf("a streamd user exists already (an earlier install): %s", out)
	}
	deb := m.copyIn(a.deb)

	// Install.
	t.Logf("dpkg -i: %s", m.in("dpkg -i "+deb))
	if got := m.in("command -v streamd"); strings.TrimSpace(got) != "/usr/bin/streamd" {
		t.Errorf("streamd on PATH: %q", got)
	}
	if got := m.in("streamd version"); !strings.Contains(got, a.build.Version) {
		t.Errorf("streamd version: %q", got)
	}
	pw := strings.Split(strings.TrimSpace(m.in("getent passwd streamd")), ":")
	if len(pw) != 7 || pw[5] != "/var/lib/streamd" || pw[6] != "/usr/sbin/nologin" {
		t.Fatalf("the streamd user: %q", pw)
	}
	var uid int
	if _, err := fmt.Sscan(pw[2], &uid); err != nil {
		t.Fatalf("streamd's uid %q: %v", pw[2], err)
	}
	if uid <= 0 || uid >= 1000 {
		t.Errorf("streamd's uid %d is not a system uid", uid)
	}
	if got := strings.TrimSpace(m.in("stat -c '%U:%G %a' /var/lib/streamd")); got != "streamd:streamd 750" {
		t.Errorf("/var/lib/streamd: %s, want streamd:streamd 750", got)
	}
	conffiles := m.in("dpkg-query -W -f='${Conffiles}' streamd")
	for _, f := range []string{"/etc/streamd/streamd.toml", "/etc/streamd/plugins/upper.wasm"} {
		if !strings.Contains(conffiles, f+" ") {
			t.Errorf("%s is not a conffile: %s", f, conffiles)
		}
	}
	if got := m.in("grep -c '^data_dir = \"/var/lib/streamd\"' /etc/streamd/streamd.toml"); strings.TrimSpace(got) != "1" {
		t.Errorf("the packaged config's data_dir is not /var/lib/streamd")
	}
	// The unit as installed verifies in this root.
	if out, err := m.try(`systemd-analyze verify --root="$ROOT" /usr/lib/systemd/system/streamd.service`); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	if got := m.in("streamd lint -c /etc/streamd/streamd.toml && echo lint-ok"); !strings.Contains(got, "lint-ok") {
		t.Errorf("streamd lint of the packaged config: %s", got)
	}
	// Not enabled, not started: the operator edits the config first.
	if out, _ := m.tryIn("ls /etc/systemd/system/multi-user.target.wants/streamd.service"); !strings.Contains(out, "No such file") {
		t.Errorf("the service was enabled on install: %s", out)
	}

	// Run the unit's command as its user, in a network namespace of its
	// own (as systemd would start it, without systemd).
	t.Run("runs as streamd", func(t *testing.T) {
		cmd := exec.Command("nsenter", "--target", fmt.Sprint(m.holder.Process.Pid), "--mount", "--",
			"unshare", "--net", "--fork", "--kill-child", "sh", "-c",
			`ip link set lo up && exec chroot --userspec="$U:$G" --groups="$G" "$ROOT" /usr/bin/env -i HOME=/var/lib/streamd sh -c 'cd /var/lib/streamd && exec /usr/bin/streamd run -c /etc/streamd/streamd.toml'`)
		cmd.Env = append(os.Environ(), "ROOT="+m.root, "U="+pw[2], "G="+pw[3])
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("streamd's log:\n%s", log.String())
			}
		}()
		// nsenter execs unshare, which is then in the new network namespace.
		var pid int
		for i := 0; i < 100; i++ {
			ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
			self, _ := os.Readlink("/proc/self/ns/net")
			if ns != "" && ns != self {
				pid = cmd.Process.Pid
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if pid == 0 {
			t.Fatal("streamd's network namespace did not appear")
		}
		body := waitHTTP(t, pid, "http://127.0.0.1:8080/pipelines", 60*time.Second, func(s int, b []byte) bool {
			n, err := pipelineOut(b, "upper")
			return s == 200 && err == nil && n >= 20
		})
		n, _ := pipelineOut(body, "upper")
		if got := uidOf(t, childOf(t, pid)); got != fmt.Sprint(uid) {
			t.Errorf("streamd runs as uid %s, want streamd's %d", got, uid)
		}
		t.Logf("the packaged config runs as streamd: pipeline upper %d records out", n)
		_ = syscall.Kill(childOf(t, pid), syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("after SIGTERM: %v", err)
		}
	})
	if out := m.in("ls /var/lib/streamd"); !strings.Contains(out, "broker") {
		t.Errorf("/var/lib/streamd after a run: %q", out)
	}

	// A developer on this machine, in a home that is no checkout, makes a
	// Rust plugin with the installed streamd and runs the two commands it
	// prints, as printed: the SDK comes from the binary.
	t.Run("plugin new from the installed streamd", func(t *testing.T) {
		m.in("useradd --create-home --shell /bin/sh dev")
		dev := func(script string) (string, error) {
			return m.tryIn(`runuser -u dev -- /usr/bin/env -i HOME=/home/dev PATH=/usr/bin:/bin LANG=C.UTF-8 sh -c 'cd /home/dev && ` + script + `'`)
		}
		out, err := dev("streamd plugin new --lang rust --kind transform upper-rs")
		if err != nil {
			t.Fatalf("plugin new: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.Contains(lines[0], "streamd-sdk/") {
			t.Fatalf("plugin new printed:\n%s", out)
		}
		build, test := strings.TrimSpace(lines[2]), strings.TrimSpace(lines[3])
		out, err = dev(build + " && " + test)
		if err != nil || !strings.Contains(out, "ok plugin.wasm: ") {
			t.Fatalf("%s && %s: %v\n%s", build, test, err, out)
		}
		t.Logf("%s && %s:\n%s", build, test, out)
	})

	// An upgrade keeps the operator's edit of the config, and the data.
	m.in(`printf '\n# edited by the operator\n' >> /etc/streamd/streamd.toml`)
	next := a.build
	next.Version = "99.0.0"
	// The new version's packaged config differs too: dpkg must ask, and
	// --force-confold keeps the operator's (the new one beside it).
	starter2 := filepath.Join(t.TempDir(), "starter")
	if o, err := exec.Command("cp", "-r", a.starter, starter2).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, o)
	}
	f, err := os.OpenFile(filepath.Join(starter2, "streamd.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "# a line of the next version")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	pkgs, err := next.Packages(runtime.GOARCH, a.bin, starter2, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	deb2 := m.copyIn(pkgs[0])
	t.Logf("upgrade: %s", m.in("dpkg -i --force-confdef --force-confold "+deb2))
	if got := m.in("dpkg-query -W -f='${Version}' streamd"); !strings.HasPrefix(got, "99.0.0") {
		t.Errorf("after the upgrade: version %q", got)
	}
	cfg := m.in("cat /etc/streamd/streamd.toml")
	if !strings.Contains(cfg, "# edited by the operator") || strings.Contains(cfg, "# a line of the next version") {
		t.Errorf("the upgrade did not keep the edited config:\n%s", cfg)
	}
	if got := m.in("cat /etc/streamd/streamd.toml.dpkg-dist"); !strings.Contains(got, "# a line of the next version") {
		t.Errorf("the new version's config is not beside it as .dpkg-dist")
	}
	if got := m.in("ls /var/lib/streamd"); !strings.Contains(got, "broker") {
		t.Errorf("the upgrade lost /var/lib/streamd: %q", got)
	}
	if pw2 := strings.TrimSpace(m.in("getent passwd streamd")); pw2 != strings.Join(pw, ":") {
		t.Errorf("the upgrade changed the user: %s", pw2)
	}

	// Remove: the program goes; config, data and user stay.
	m.in("dpkg -r streamd")
	if out, _ := m.tryIn("command -v streamd"); strings.TrimSpace(out) != "" {
		t.Errorf("after dpkg -r, streamd is still on PATH: %s", out)
	}
	if out, _ := m.tryIn("ls /usr/lib/systemd/system/streamd.service"); !strings.Contains(out, "No such file") {
		t.Errorf("after dpkg -r, the unit is still there")
	}
	if got := m.in("dpkg-query -W -f='${Status}' streamd"); got != "deinstall ok config-files" {
		t.Errorf("after dpkg -r: status %q, want the config files kept", got)
	}
	if !strings.Contains(m.in("cat /etc/streamd/streamd.toml"), "# edited by the operator") || !strings.Contains(m.in("ls /var/lib/streamd"), "broker") {
		t.Errorf("dpkg -r removed the config or the data")
	}

	// Purge: config and data go; the user stays (Debian practice).
	m.in("dpkg --purge streamd")
	for _, p := range []string{"/etc/streamd", "/var/lib/streamd"} {
		if out, _ := m.tryIn("ls -d " + p); !strings.Contains(out, "No such file") {
			t.Errorf("after --purge, %s is still there: %s", p, out)
		}
	}
	if out, _ := m.tryIn("dpkg-query -W -f='${Status}' streamd"); strings.Contains(out, "installed") || strings.Contains(out, "config-files") {
		t.Errorf("after --purge: %q", out)
	}
	if out := m.in("getent passwd streamd || true"); !strings.HasPrefix(out, "streamd:") {
		t.Errorf("after --purge the user is gone (it stays: files it owns may remain)")
	}
}

// TestRPM: the .rpm's metadata read by rpm, and the package installed,
// upgraded over an edited config and erased by rpm on a copy of this
// machine (Debian's rpm 4.18: the scriptlets run with Debian's useradd and
// without systemd, as on a container build of an RPM system).
func TestRPM(t *testing.T) {
	needRoot(t, "rpm")
	a := getArtifacts(t)
	q := func(format string) string {
		t.Helper()
		out, err := exec.Command("rpm", "-qp", "--qf", format, a.rpm).CombinedOutput()
		if err != nil {
			t.Fatalf("rpm -qp: %v\n%s", err, out)
		}
		return string(out)
	}
	if got := q("%{NAME} %{OS}"); got != "streamd linux" {
		t.Errorf("rpm: %q", got)
	}
	files := q(`[%{FILEFLAGS:fflags}|%{FILEMODES:perms}|%{FILEUSERNAME}:%{FILEGROUPNAME}|%{FILENAMES}\n]`)
	for _, want := range []string{
		"cn|-rw-r--r--|root:root|/etc/streamd/streamd.toml\n",
		"|-rwxr-xr-x|root:root|/usr/bin/streamd\n",
		"|drwxr-x---|streamd:streamd|/var/lib/streamd\n",
		"|-rw-r--r--|root:root|/usr/lib/systemd/system/streamd.service\n",
	} {
		if !strings.Contains(files, want) {
			t.Errorf("rpm file list has no %q:\n%s", want, files)
		}
	}
	if req, _ := exec.Command("rpm", "-qp", "--requires", a.rpm).Output(); !strings.Contains(string(req), "shadow-utils") {
		t.Errorf("requires: %s", req)
	}

	m := newMachine(t)
	rpm := m.copyIn(a.rpm)
	t.Logf("rpm -i: %s", m.in("rpm -i --nodeps "+rpm+" 2>&1 && echo installed"))
	pw := strings.Split(strings.TrimSpace(m.in("getent passwd streamd")), ":")
	if len(pw) != 7 || pw[5] != "/var/lib/streamd" {
		t.Fatalf("%%pre made no streamd user: %q", pw)
	}
	if got := strings.TrimSpace(m.in("stat -c '%U:%G %a' /var/lib/streamd")); got != "streamd:streamd 750" {
		t.Errorf("/var/lib/streamd: %s", got)
	}
	if out, err := m.tryIn("rpm -V --nodeps streamd"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("rpm -V after install: %v\n%s", err, out)
	}
	m.in(`printf '\n# edited by the operator\n' >> /etc/streamd/streamd.toml`)
	next := a.build
	next.Version = "99.0.0"
	starter2 := filepath.Join(t.TempDir(), "starter")
	if o, err := exec.Command("cp", "-r", a.starter, starter2).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, o)
	}
	f, err := os.OpenFile(filepath.Join(starter2, "streamd.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "# a line of the next version")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	pkgs, err := next.Packages(runtime.GOARCH, a.bin, starter2, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rpm2 := m.copyIn(pkgs[1])
	t.Logf("rpm -U: %s", m.in("rpm -U --nodeps "+rpm2+" 2>&1 && echo upgraded"))
	if got := m.in("rpm -q --qf '%{VERSION}' streamd"); got != "99.0.0" {
		t.Errorf("after the upgrade: %q", got)
	}
	if cfg := m.in("cat /etc/streamd/streamd.toml"); !strings.Contains(cfg, "# edited by the operator") {
		t.Errorf("rpm -U replaced the edited config")
	}
	if got := m.in("cat /etc/streamd/streamd.toml.rpmnew"); !strings.Contains(got, "# a line of the next version") {
		t.Errorf("no streamd.toml.rpmnew with the new default")
	}
	m.in("rpm -e streamd")
	if out, _ := m.tryIn("command -v streamd"); strings.TrimSpace(out) != "" {
		t.Errorf("after rpm -e, streamd is still on PATH")
	}
	if got := m.in("cat /etc/streamd/streamd.toml.rpmsave"); !strings.Contains(got, "# edited by the operator") {
		t.Errorf("rpm -e did not save the edited config as .rpmsave")
	}
	if out := m.in("getent passwd streamd || true"); !strings.HasPrefix(out, "streamd:") {
		t.Errorf("rpm -e removed the user")
	}
}

// TestDebLintian: Debian's own policy checker finds no error in the .deb.
// One error is known and left to be decided: no-copyright-file (the
// repository declares no license yet, so there is none to write into
// /usr/share/doc/streamd/copyright).
func TestDebLintian(t *testing.T) {
	lintian, err := exec.LookPath("lintian")
	if err != nil {
		if os.Getenv("STREAMD_REQUIRE_ALL") == "1" {
			t.Fatal("STREAMD_REQUIRE_ALL=1 and lintian is not installed (scripts/install-tools dist)")
		}
		t.Skip("lintian is not installed (scripts/install-tools dist)")
	}
	a := getArtifacts(t)
	known := map[string]bool{"no-copyright-file": true}
	out, err := exec.Command(lintian, "--fail-on", "none", "--tag-display-limit", "0", a.deb).CombinedOutput()
	if err != nil {
		t.Fatalf("lintian: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "E:" {
			continue
		}
		if known[f[2]] {
			t.Logf("known: %s", l)
			continue
		}
		t.Errorf("lintian: %s", l)
	}
	t.Logf("lintian %s:\n%s", filepath.Base(a.deb), out)

	// The changelog's entry is this package's version.
	cl, err := exec.Command("sh", "-c", `dpkg-deb --fsys-tarfile "$0" | tar -xO ./usr/share/doc/streamd/changelog.Debian.gz | zcat | head -1`, a.deb).CombinedOutput()
	if err != nil {
		t.Fatalf("changelog.Debian.gz: %v\n%s", err, cl)
	}
	v, err := exec.Command("dpkg-deb", "-f", a.deb, "Version").Output()
	if want := "streamd (" + strings.TrimSpace(string(v)) + ") stable; urgency=medium\n"; err != nil || string(cl) != want {
		t.Errorf("changelog.Debian.gz begins %q, want %q (%v)", cl, want, err)
	}
}
