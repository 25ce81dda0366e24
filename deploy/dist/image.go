package dist

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's user: not root, with a fixed id that a Kubernetes
// securityContext (runAsUser) and a volume's owner can name.
const (
	ImageUID  = 65532
	ImageUser = "65532:65532"
	// AdminPort is the port the image exposes: the admin listener's of a
	// config that listens on every address (the Helm chart's).
	AdminPort = "8080/tcp"
	// ImageDataDir is the volume for streamd's state (data_dir).
	ImageDataDir = "/var/lib/streamd"
)

// file is one entry of a layer.
type file struct {
	name string // without a leading /
	mode int64  // permission bits; a directory when dir
	dir  bool
	uid  int
	body []byte
}

// Image assembles streamd's image for linux/arch, FROM scratch: the static
// binary at /usr/bin/streamd, CA certificates
// (/etc/ssl/certs/ca-certificates.crt, Mozilla's roots as the Go project
// ships them), the time zones of the Go that builds it (/usr/share/zoneinfo),
// the user streamd (65532) it runs as, /var/lib/streamd as its volume and
// working directory, and what Starter wrote in /etc/streamd, which its
// command runs: `streamd run -c /etc/streamd/streamd.toml`. No
// HEALTHCHECK: the platform probes /healthz and /readyz.
func (b Build) Image(arch, bin, starter string) (v1.Image, error) {
	base, err := baseFiles()
	if err != nil {
		return nil, err
	}
	binBody, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	etc := []file{{name: "etc/streamd", dir: true, mode: 0o755}}
	err = filepath.WalkDir(starter, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == starter {
			return err
		}
		rel, err := filepath.Rel(starter, p)
		if err != nil {
			return err
		}
		name := path.Join("etc/streamd", filepath.ToSlash(rel))
		if d.IsDir() {
			etc = append(etc, file{name: name, dir: true, mode: 0o755})
			return nil
		}
		body, err := os.ReadFile(p)
		etc = append(etc, file{name: name, mode: 0o644, body: body})
		return err
	})
	if err != nil {
		return nil, err
	}
	layers := []struct {
		files []file
		what  string
	}{
		{base, "users, CA certificates, time zones, /var/lib/streamd"},
		{[]file{{name: "usr", dir: true, mode: 0o755}, {name: "usr/bin", dir: true, mode: 0o755}, {name: "usr/bin/streamd", mode: 0o755, body: binBody}}, "the streamd binary"},
		{etc, "the starter config and plugin (streamd init)"},
	}
	created := v1.Time{Time: b.Epoch.UTC()}
	img := empty.Image
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		layer, err := b.layer(l.files)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: created, CreatedBy: "deploy/dist: " + l.what, Comment: "streamd " + b.Version},
		})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	if arch == "arm64" {
		cf.Variant = "v8"
	}
	cf.Created = created
	cf.Author = "streamd"
	cf.Config = v1.Config{
		User:         ImageUser,
		Entrypoint:   []string{"/usr/bin/streamd"},
		Cmd:          []string{"run", "-c", "/etc/streamd/streamd.toml"},
		WorkingDir:   ImageDataDir,
		Env:          []string{"PATH=/usr/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		ExposedPorts: map[string]struct{}{AdminPort: {}},
		Volumes:      map[string]struct{}{ImageDataDir: {}},
		StopSignal:   "SIGTERM",
		Labels:       b.Labels(),
	}
	return mutate.ConfigFile(img, cf)
}

// Labels are the image's OCI annotations (config labels).
func (b Build) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":         "streamd",
		"org.opencontainers.image.description":   "Stream processor for Apache Kafka with sandboxed WebAssembly plugins",
		"org.opencontainers.image.version":       b.Version,
		"org.opencontainers.image.revision":      b.Commit,
		"org.opencontainers.image.created":       b.Epoch.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":        "https://github.com/streamd/streamd",
		"org.opencontainers.image.url":           "https://github.com/streamd/streamd",
		"org.opencontainers.image.documentation": "https://github.com/streamd/streamd/blob/main/docs/operations.md",
		"org.opencontainers.image.vendor":        "streamd",
	}
}

// layer is a gzip-compressed tar of files, in order, each with the
// build's time, owned by root unless said.
func (b Build) layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	sort.SliceStable(files, func(i, j int) bool { return files[i].name < files[j].name })
	for _, f := range files {
		h := &tar.Header{
			Name: f.name, Mode: f.mode, ModTime: b.Epoch.UTC(), Uid: f.uid, Gid: f.uid,
			Typeflag: tar.TypeReg, Size: int64(len(f.body)),
		}
		if f.dir {
			h.Name += "/"
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	body := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(body)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression))
}

// baseFiles are the image's system files.
func baseFiles() ([]file, error) {
	dirs := []file{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/ssl", dir: true, mode: 0o755},
		{name: "etc/ssl/certs", dir: true, mode: 0o755},
		{name: "tmp", dir: true, mode: 0o1777},
		{name: "usr", dir: true, mode: 0o755},
		{name: "usr/share", dir: true, mode: 0o755},
		{name: "var", dir: true, mode: 0o755},
		{name: "var/lib", dir: true, mode: 0o755},
		{name: "var/lib/streamd", dir: true, mode: 0o750, uid: ImageUID},
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nstreamd:x:%d:%d:streamd:%s:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n", ImageUID, ImageUID, ImageDataDir)
	group := fmt.Sprintf("root:x:0:\nstreamd:x:%d:\nnogroup:x:65534:\n", ImageUID)
	files := append(dirs,
		file{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		file{name: "etc/group", mode: 0o644, body: []byte(group)},
		file{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		file{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: caBundle()},
	)
	zones, err := zoneinfo()
	if err != nil {
		return nil, err
	}
	return append(files, zones...), nil
}

// caBundle is Mozilla's root CAs (NSS) as PEM, from
// golang.org/x/crypto/x509roots/fallback: pinned by go.mod, so the same
// on every machine. Roots with a constraint PEM cannot say (distrusted
// after a date) are left out.
func caBundle() []byte {
	var out bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return out.Bytes()
}

// zoneinfo is /usr/share/zoneinfo from the time zone database of the Go
// that builds the image ($GOROOT/lib/time/zoneinfo.zip).
func zoneinfo() ([]file, error) {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	zr, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = zr.Close() }()
	files := []file{{name: "usr/share/zoneinfo", dir: true, mode: 0o755}}
	seen := map[string]bool{}
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		name := path.Join("usr/share/zoneinfo", f.Name)
		for d := path.Dir(name); d != "usr/share/zoneinfo" && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			files = append(files, file{name: d, dir: true, mode: 0o755})
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return nil, err
		}
		files = append(files, file{name: name, mode: 0o644, body: body})
	}
	return files, nil
}

// WriteImage writes img as one tar file that is both an OCI image layout
// (oci-layout, index.json, blobs/: `podman load`, `skopeo copy
// oci-archive:`, `crane push`) and a `docker save` archive (manifest.json:
// `docker load`), as `docker save` itself writes since Docker 25. ref is
// the image's name, such as streamd:0.2.0.
func WriteImage(img v1.Image, ref, out string, epoch time.Time) error {
	dir, err := os.MkdirTemp("", "streamd-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	full := ref
	if !strings.Contains(strings.SplitN(ref, "/", 2)[0], ".") {
		full = "docker.io/library/" + ref
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref[strings.LastIndex(ref, ":")+1:],
		"io.containerd.image.name":          full,
	})); err != nil {
		return err
	}
	cfg, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	dm := []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{Config: "blobs/sha256/" + cfg.Hex, RepoTags: []string{ref}}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		dm[0].Layers = append(dm[0].Layers, "blobs/sha256/"+d.Hex)
	}
	mj, err := json.Marshal(dm)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), mj, 0o644); err != nil {
		return err
	}
	return tarDir(dir, out, epoch)
}

// tarDir writes dir's files as a tar at out, in order, with epoch's time.
func tarDir(dir, out string, epoch time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		h := &tar.Header{Name: n, Mode: 0o644, ModTime: epoch.UTC(), Typeflag: tar.TypeReg, Size: fi.Size()}
		if fi.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = n+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			body, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				return err
			}
			if _, err := tw.Write(body); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
