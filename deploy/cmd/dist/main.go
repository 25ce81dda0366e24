// Command dist builds what streamd ships into one folder (scripts/dist and
// `make dist` run it):
//
//	linux_ARCH/streamd                      the static binary
//	streamd_VERSION_ARCH.deb                Debian and Ubuntu
//	streamd-VERSION-1.RPMARCH.rpm           Fedora, RHEL and the like
//	streamd_VERSION_linux_ARCH.oci.tar      the image: docker load, podman load, crane push
//	streamd-VERSION.tgz                     the Helm chart
//	build.json                              version, commit, epoch, architectures
//	SHA256SUMS
//
// Usage:
//
//	go run ./cmd/dist -root .. -out ../dist -version V -commit C -epoch SECONDS [-arch amd64,arm64]
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/streamd/streamd/deploy/dist"
)

func main() {
	root := flag.String("root", "..", "the streamd repository")
	out := flag.String("out", "../dist", "where to write (emptied first)")
	version := flag.String("version", "", "semantic version, without a leading v")
	commit := flag.String("commit", "", "the commit (full hash)")
	epoch := flag.Int64("epoch", 0, "every file's time, in seconds since 1970 (the commit's: SOURCE_DATE_EPOCH)")
	archs := flag.String("arch", runtime.GOARCH, "GOARCHes, comma-separated (amd64, arm64)")
	flag.Parse()
	if err := run(*root, *out, *version, *commit, *epoch, strings.Split(*archs, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run(root, out, version, commit string, epoch int64, archs []string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	out, err = filepath.Abs(out)
	if err != nil {
		return err
	}
	b := dist.Build{Root: root, Version: version, Commit: commit, Epoch: time.Unix(epoch, 0).UTC()}
	if err := b.Check(); err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Printf("[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	bins := map[string]string{}
	for _, arch := range archs {
		bin := filepath.Join(out, "linux_"+arch, "streamd")
		step("go build linux/%s (static, -trimpath, %s)", arch, version)
		if err := b.Binary(arch, bin); err != nil {
			return err
		}
		bins[arch] = bin
	}
	// The starter config is written by a streamd that runs here.
	host := bins[runtime.GOARCH]
	if host == "" {
		host = filepath.Join(out, "tmp", "streamd")
		step("go build linux/%s (to run streamd init)", runtime.GOARCH)
		if err := b.Binary(runtime.GOARCH, host); err != nil {
			return err
		}
	}
	starter := filepath.Join(out, "tmp", "starter")
	step("streamd init --data-dir /var/lib/streamd (the config under /etc/streamd)")
	if err := dist.Starter(host, starter); err != nil {
		return err
	}
	for _, arch := range archs {
		step("packages linux/%s: %s", arch, strings.Join(dist.PackageFormats, ", "))
		if _, err := b.Packages(arch, bins[arch], starter, out); err != nil {
			return err
		}
		step("image linux/%s", arch)
		img, err := b.Image(arch, bins[arch], starter)
		if err != nil {
			return err
		}
		ref := "streamd:" + b.ImageTag()
		if len(archs) > 1 {
			ref += "-" + arch
		}
		if err := dist.WriteImage(img, ref, filepath.Join(out, fmt.Sprintf("streamd_%s_linux_%s.oci.tar", b.ImageTag(), arch)), b.Epoch); err != nil {
			return err
		}
	}
	step("Helm chart")
	if _, err := b.Chart(out); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(out, "tmp")); err != nil {
		return err
	}
	// What the tests of deploy/dist read to build the same again.
	bj, err := json.Marshal(map[string]any{"version": b.Version, "commit": b.Commit, "epoch": epoch, "arch": archs})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "build.json"), append(bj, '\n'), 0o644); err != nil {
		return err
	}
	step("SHA256SUMS")
	return sums(out)
}

// sums writes out/SHA256SUMS (sha256sum -c reads it) and prints each file.
func sums(out string) error {
	var names []string
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(out, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	var lines strings.Builder
	for _, n := range names {
		f, err := os.Open(filepath.Join(out, n))
		if err != nil {
			return err
		}
		h := sha256.New()
		size, err := io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			return err
		}
		sum := hex.EncodeToString(h.Sum(nil))
		fmt.Fprintf(&lines, "%s  %s\n", sum, n)
		fmt.Printf("  %-48s %6.1f MiB  sha256:%s\n", n, float64(size)/(1<<20), sum[:16])
	}
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(lines.String()), 0o644)
}
