// Package dist builds what streamd ships: the static binary, the .deb and
// .rpm packages (nfpm), the OCI image (go-containerregistry, no container
// engine) and the Helm chart's archive. deploy/cmd/dist runs it for
// scripts/dist (`make dist`); the tests of this package check what it
// builds: the packages installed by dpkg in a throwaway root, the image's
// rootfs run in fresh namespaces.
//
// Every output of one commit is the same bytes wherever it is built: file
// times are the commit's (Build.Epoch), the binary is built with -trimpath
// and without cgo, archives list their files in order.
package dist

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Build says what is being built.
type Build struct {
	// Root is the streamd repository's root.
	Root string
	// Version is a semantic version without a leading v (0.2.0,
	// 0.2.0-rc.1, 0.1.0-dev.612+g6003acb).
	Version string
	// Commit is the full commit hash (with "-dirty" for a tree with
	// changes).
	Commit string
	// Epoch is every file's time: the commit's (SOURCE_DATE_EPOCH).
	Epoch time.Time
}

var semverRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// Check says what is wrong with b, if anything.
func (b Build) Check() error {
	if !semverRE.MatchString(b.Version) {
		return fmt.Errorf("version %q is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])", b.Version)
	}
	if b.Commit == "" {
		return fmt.Errorf("no commit")
	}
	if b.Epoch.IsZero() {
		return fmt.Errorf("no epoch (the commit's time)")
	}
	if _, err := os.Stat(filepath.Join(b.Root, "cmd", "streamd")); err != nil {
		return fmt.Errorf("root %s is not a streamd repository: %w", b.Root, err)
	}
	return nil
}

// ImageTag is Version as an image tag (which has no '+').
func (b Build) ImageTag() string { return strings.ReplaceAll(b.Version, "+", "_") }

// Binary builds the static streamd for linux/arch into out: no cgo,
// -trimpath, the version and commit stamped into main.version and
// main.commit, the symbol table and DWARF left out (stack traces keep
// their function names and lines).
func (b Build) Binary(arch, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", b.Version, b.Commit)
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./cmd/streamd")
	cmd.Dir = b.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build (linux/%s): %v\n%s", arch, err, stderr.Bytes())
	}
	return nil
}

// Starter writes into dir what `streamd init --data-dir /var/lib/streamd`
// writes (the starter config and plugin that the packages and the image
// put under /etc/streamd), with a streamd binary that runs here.
func Starter(bin, dir string) error {
	cmd := exec.Command(bin, "init", "--data-dir", "/var/lib/streamd", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s init: %v\n%s", bin, err, out)
	}
	for _, f := range []string{"streamd.toml", "plugins/upper.wasm", "plugins/upper.wat"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("streamd init wrote no %s: %w", f, err)
		}
	}
	return nil
}
