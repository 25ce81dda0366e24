package dist

import (
	"archive/tar"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// readImage reads the image tar both ways a loader does: as a `docker
// save` archive (manifest.json: what docker load reads) and as an OCI
// layout (index.json: what podman load, skopeo and crane read), and checks
// that they are one image.
func readImage(t *testing.T, path string) v1.Image {
	t.Helper()
	docker, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatalf("as a docker archive: %v", err)
	}
	dir := t.TempDir()
	untar(t, path, dir, false)
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("as an OCI layout: %v", err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] == "" {
		t.Fatalf("index.json: want one image with a ref.name, got %+v", im.Manifests)
	}
	oci, err := ii.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range []v1.Image{docker, oci} {
		cn, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := oci.ConfigName()
		if cn != want {
			t.Fatalf("the docker archive's config %s is not the OCI layout's %s", cn, want)
		}
	}
	dl, _ := docker.Layers()
	ol, _ := oci.Layers()
	if len(dl) != len(ol) {
		t.Fatalf("%d layers as a docker archive, %d as an OCI layout", len(dl), len(ol))
	}
	for i := range dl {
		a, _ := dl[i].DiffID()
		b, _ := ol[i].DiffID()
		if a != b {
			t.Fatalf("layer %d: %s vs %s", i, a, b)
		}
	}
	return oci
}

// untar extracts path into dir; with owners, as root would (owners and
// modes kept).
func untar(t *testing.T, path, dir string, owners bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	extract(t, f, dir, owners)
}

func extract(t *testing.T, r io.Reader, dir string, owners bool) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(h.Name, "..") {
			t.Fatalf("entry %q", h.Name)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatal(err)
			}
			_ = w.Close()
		default:
			t.Fatalf("%s: entry type %c", h.Name, h.Typeflag)
		}
		if err := os.Chmod(p, os.FileMode(h.Mode)&os.ModePerm|modeBits(h.Mode)); err != nil {
			t.Fatal(err)
		}
		if owners {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// TestImageConfig: the image's config, read with go-containerregistry, and
// its files.
func TestImageConfig(t *testing.T) {
	a := getArtifacts(t)
	img := readImage(t, a.image)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if c.User != ImageUser {
		t.Errorf("user %q, want %q (not root)", c.User, ImageUser)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/bin/streamd"}) || !slices.Equal(c.Cmd, []string{"run", "-c", "/etc/streamd/streamd.toml"}) {
		t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
	}
	if _, ok := c.ExposedPorts[AdminPort]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want %s", c.ExposedPorts, AdminPort)
	}
	if _, ok := c.Volumes[ImageDataDir]; !ok || c.WorkingDir != ImageDataDir {
		t.Errorf("volumes %v, working dir %q: want %s", c.Volumes, c.WorkingDir, ImageDataDir)
	}
	if c.Healthcheck != nil {
		t.Errorf("a HEALTHCHECK: %+v (the platform probes /healthz and /readyz)", c.Healthcheck)
	}
	for k, v := range a.build.Labels() {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if c.Labels["org.opencontainers.image.version"] != a.build.Version || c.Labels["org.opencontainers.image.revision"] != a.build.Commit {
		t.Errorf("labels %v", c.Labels)
	}
	if !cf.Created.Equal(a.build.Epoch) {
		t.Errorf("created %v, want the commit's time %v", cf.Created, a.build.Epoch)
	}
	mt, _ := img.MediaType()
	if !strings.Contains(string(mt), "oci") {
		t.Errorf("manifest media type %s, want OCI", mt)
	}

	// The files: FROM scratch, so exactly what deploy/dist put in.
	root := t.TempDir()
	extract(t, mutate.Extract(img), root, false)
	fi, err := os.Stat(filepath.Join(root, "usr/bin/streamd"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("/usr/bin/streamd: %v %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "usr/bin/streamd")); err != nil || !sameFile(t, a.bin, b) {
		t.Errorf("/usr/bin/streamd is not the static binary built for the image")
	}
	pemBytes, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for block, rest := pem.Decode(pemBytes); block != nil; block, rest = pem.Decode(rest) {
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("CA certificate %d: %v", n, err)
		}
		n++
	}
	if n < 100 {
		t.Errorf("%d CA certificates, want Mozilla's (over 100)", n)
	}
	tz, err := os.ReadFile(filepath.Join(root, "usr/share/zoneinfo/Europe/Berlin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := time.LoadLocationFromTZData("Europe/Berlin", tz); err != nil {
		t.Errorf("zoneinfo: %v", err)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), "streamd:x:65532:65532:") {
		t.Errorf("/etc/passwd has no streamd 65532:\n%s", passwd)
	}
	cfg, err := os.ReadFile(filepath.Join(root, "etc/streamd/streamd.toml"))
	if err != nil || !strings.Contains(string(cfg), `data_dir = "/var/lib/streamd"`) {
		t.Errorf("/etc/streamd/streamd.toml: %v\n%s", err, cfg)
	}
	t.Logf("image %s: %d layers, %d CA certificates; manifest %s", filepath.Base(a.image), len(mustLayers(t, img)), n, mustDigest(t, img))
}

func sameFile(t *testing.T, path string, b []byte) bool {
	t.Helper()
	want, err := os.ReadFile(path)
	return err == nil && string(want) == string(b)
}

func mustLayers(t *testing.T, img v1.Image) []v1.Layer {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func mustDigest(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// rootfs unpacks the image's layers, as a container runtime does, with
// owners and modes, and the mount points a runtime makes.
func rootfs(t *testing.T, img v1.Image) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	extract(t, mutate.Extract(img), root, true)
	for _, d := range []string{"proc", "dev", "sys"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// runContainer runs the image's entrypoint with args (the image's Cmd when
// none) from the unpacked root as a runtime would: new mount, PID and
// network namespaces (a loopback of its own), /proc and a minimal /dev,
// chroot into the root, the config's working directory, environment and
// user. It returns the unshare process (in the network namespace) and the
// daemon's host pid.
func runContainer(t *testing.T, root string, cf *v1.ConfigFile, args ...string) (*exec.Cmd, int) {
	t.Helper()
	c := cf.Config
	if len(args) == 0 {
		args = c.Cmd
	}
	uid, gid, _ := strings.Cut(c.User, ":")
	script := `set -e
ip link set lo up
mount -t proc proc "$ROOT/proc"
mount -t tmpfs -o mode=755,nosuid tmpfs "$ROOT/dev"
for d in null zero random urandom; do touch "$ROOT/dev/$d"; mount --bind "/dev/$d" "$ROOT/dev/$d"; done
exec env -i ` + strings.Join(c.Env, " ") + ` /usr/bin/unshare --root="$ROOT" --wd="$WD" --setgid=` + gid + ` --setuid=` + uid + ` "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--pid", "--net", "--fork", "--kill-child", "--propagation", "private",
		"sh", "-c", script, "container"}, append(c.Entrypoint, args...)...)...)
	cmd.Env = append(os.Environ(), "ROOT="+root, "WD="+c.WorkingDir)
	log, err := os.Create(filepath.Join(t.TempDir(), "streamd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("the container's output:\n%s", b)
		}
	})
	return cmd, childOf(t, cmd.Process.Pid)
}

// stopContainer sends SIGTERM to the daemon, as a runtime stopping the
// container does, and wants it to drain and exit 0.
func stopContainer(t *testing.T, cmd *exec.Cmd, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v (want exit 0)", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("still running 60 s after SIGTERM")
	}
}

// TestImageRuns: the image's rootfs, unpacked, runs as a container would
// (namespaces, chroot, its user 65532): the default command serves
// /healthz and /readyz and runs the starter pipeline on the embedded broker;
// and the quickstart (config.toml with the Go orders downgrade plugin,
// mounted into the root as a user mounts a config) runs too.
func TestImageRuns(t *testing.T) {
	needRoot(t)
	a := getArtifacts(t)
	img := readImage(t, a.image)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	root := rootfs(t, img)

	t.Run("default command", func(t *testing.T) {
		cmd, pid := runContainer(t, root, cf)
		waitHTTP(t, cmd.Process.Pid, "http://127.0.0.1:8080/healthz", 30*time.Second, func(s int, _ []byte) bool { return s == 200 })
		// Once it answers, the exec chain (sh, unshare --setuid) is done.
		if got := uidOf(t, pid); got != "65532" {
			t.Errorf("the daemon runs as uid %s, want 65532", got)
		}
		waitHTTP(t, cmd.Process.Pid, "http://127.0.0.1:8080/readyz", 60*time.Second, func(s int, _ []byte) bool { return s == 200 })
		body := waitHTTP(t, cmd.Process.Pid, "http://127.0.0.1:8080/pipelines", 60*time.Second, func(s int, b []byte) bool {
			n, err := pipelineOut(b, "upper")
			return s == 200 && err == nil && n >= 40
		})
		n, _ := pipelineOut(body, "upper")
		t.Logf("pipeline upper: %d records out", n)
		stopContainer(t, cmd, pid)
		// Its state went to the volume, owned by its user.
		if _, err := os.Stat(filepath.Join(root, "var/lib/streamd/broker")); err != nil {
			t.Errorf("no broker data under /var/lib/streamd: %v", err)
		}
	})

	t.Run("quickstart", func(t *testing.T) {
		plugin := filepath.Join(a.build.Root, "examples/wasm/go/orders-downgrade/plugin.wasm")
		if _, err := os.Stat(plugin); err != nil {
			out, err := exec.Command("bash", filepath.Join(a.build.Root, "examples/wasm/go/orders-downgrade/build.sh")).CombinedOutput()
			if err != nil {
				t.Fatalf("build the quickstart's plugin: %v\n%s", err, out)
			}
		}
		qs := filepath.Join(root, "quickstart")
		for _, f := range []string{"config.toml", "examples/wasm/go/orders-downgrade/plugin.wasm"} {
			b, err := os.ReadFile(filepath.Join(a.build.Root, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(qs, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(qs, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// data_dir = "data" is relative to the config: writable by the user.
		if err := os.Mkdir(filepath.Join(qs, "data"), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(qs, "data"), ImageUID, ImageUID); err != nil {
			t.Fatal(err)
		}
		cmd, pid := runContainer(t, root, cf, "run", "-c", "/quickstart/config.toml")
		body := waitHTTP(t, cmd.Process.Pid, "http://127.0.0.1:8080/pipelines", 90*time.Second, func(s int, b []byte) bool {
			n, err := pipelineOut(b, "orders")
			return s == 200 && err == nil && n >= 40
		})
		n, _ := pipelineOut(body, "orders")
		t.Logf("quickstart pipeline orders (Go orders downgrade): %d records out", n)
		stopContainer(t, cmd, pid)
	})
}

// TestPodmanLoad: podman loads the image tar both ways, as the `docker
// save` archive it is (podman load) and as an OCI archive (podman pull
// oci-archive:), into a store of the test's own, and sees the same image:
// its config digest, user, entrypoint, command, port, volume and version
// label. (Running it needs a container runtime, which cannot start here:
// TestImageRuns runs the rootfs in namespaces instead.)
func TestPodmanLoad(t *testing.T) {
	needRoot(t, "podman")
	a := getArtifacts(t)
	img := readImage(t, a.image)
	cfgName, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	podman := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("podman", append([]string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ref := "streamd:" + a.build.ImageTag()
	if out := podman("load", "-i", a.image); !strings.Contains(out, "Loaded image: localhost/"+ref) {
		t.Errorf("podman load: %s", out)
	}
	if out := podman("pull", "-q", "oci-archive:"+a.image); !strings.Contains(out, cfgName.Hex) {
		t.Errorf("podman pull oci-archive: %s, want the image %s", out, cfgName.Hex)
	}
	got := podman("image", "inspect", "--format", `{{.Id}}|{{.Config.User}}|{{.Config.Entrypoint}}|{{.Config.Cmd}}|{{.Config.ExposedPorts}}|{{.Config.Volumes}}|{{index .Config.Labels "org.opencontainers.image.version"}}|{{.Config.Healthcheck}}`, ref)
	want := cfgName.Hex + "|65532:65532|[/usr/bin/streamd]|[run -c /etc/streamd/streamd.toml]|map[8080/tcp:{}]|map[/var/lib/streamd:{}]|" + a.build.Version + "|<nil>"
	if got != want {
		t.Errorf("podman image inspect:\n got %s\nwant %s", got, want)
	}
}
