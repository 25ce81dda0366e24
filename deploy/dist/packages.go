package dist

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// PackageFormats are the packages Packages builds.
var PackageFormats = []string{"deb", "rpm"}

// Packages builds streamd's packages for linux/arch from
// packaging/nfpm.yaml into outDir and returns their paths (one per
// PackageFormats). bin is the static binary for arch, starter what
// Starter wrote.
func (b Build) Packages(arch, bin, starter, outDir string) ([]string, error) {
	vars := map[string]string{"VERSION": b.Version, "ARCH": arch, "BIN": bin, "STARTER": starter}
	var unknown []string
	cfg, err := nfpm.ParseFileWithEnvMapping(filepath.Join(b.Root, "packaging", "nfpm.yaml"), func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		if strings.HasPrefix(k, "NFPM_") { // nfpm's own (signing passphrases)
			return os.Getenv(k)
		}
		// A variable the file names that is not set is a mistake in the
		// file, not an empty string.
		unknown = append(unknown, "$"+k)
		return ""
	})
	if err == nil && len(unknown) > 0 {
		err = fmt.Errorf("unknown variables %s", strings.Join(unknown, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("packaging/nfpm.yaml: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	// nfpm gives a tree's files the times they have: the build's.
	err = filepath.WalkDir(starter, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, b.Epoch, b.Epoch)
	})
	if err != nil {
		return nil, err
	}
	// The .deb's changelog.Debian.gz (Debian policy 12.7): one entry, this
	// build.
	tmp, err := os.MkdirTemp("", "streamd-dist-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	changelog := filepath.Join(tmp, "changelog.yml")
	var out []string
	for _, format := range PackageFormats {
		info, err := cfg.Get(format)
		if err != nil {
			return nil, err
		}
		info.MTime = b.Epoch
		info = nfpm.WithDefaults(info)
		if format == "deb" {
			if err := os.WriteFile(changelog, b.changelog(debVersion(info), info.Maintainer), 0o644); err != nil {
				return nil, err
			}
			info.Changelog = changelog
		}
		b.absolute(info)
		pkger, err := nfpm.Get(format)
		if err != nil {
			return nil, err
		}
		target := filepath.Join(outDir, pkger.ConventionalFileName(info))
		info.Target = target
		f, err := os.Create(target)
		if err != nil {
			return nil, err
		}
		err = pkger.Package(info, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(target)
			return nil, fmt.Errorf("%s: %w", format, err)
		}
		out = append(out, target)
	}
	return out, nil
}

// debVersion is the .deb's version as its control file has it
// (0.2.0~rc.1+g0123-1).
func debVersion(info *nfpm.Info) string {
	v := info.Version
	if info.Prerelease != "" {
		v += "~" + info.Prerelease
	}
	if info.VersionMetadata != "" {
		v += "+" + info.VersionMetadata
	}
	if info.Release != "" {
		v += "-" + info.Release
	}
	return v
}

// changelog is the .deb's changelog in chglog's YAML, which nfpm formats
// as Debian's changelog: one entry, for this build (version, the package's
// version), at its time.
func (b Build) changelog(version, maintainer string) []byte {
	name, email, _ := strings.Cut(strings.TrimSuffix(maintainer, ">"), " <")
	return fmt.Appendf(nil, `- semver: %s
  date: %s
  packager: %s
  deb:
    urgency: medium
    distributions: [stable]
  changes:
    - commit: %s
      note: %s
      author: {name: %s, email: %s}
`, strconv.Quote(version), b.Epoch.UTC().Format(time.RFC3339), strconv.Quote(maintainer), strconv.Quote(b.Commit),
		strconv.Quote("Built from commit "+b.Commit), strconv.Quote(name), strconv.Quote(email))
}

// absolute makes the file's paths, which are relative to the repository's
// root, absolute (nfpm reads them relative to the working directory).
func (b Build) absolute(info *nfpm.Info) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(b.Root, p)
	}
	for _, c := range info.Contents {
		if c.Type != files.TypeDir && c.Type != files.TypeSymlink {
			c.Source = abs(c.Source)
		}
	}
	s := &info.Scripts
	s.PreInstall, s.PostInstall, s.PreRemove, s.PostRemove = abs(s.PreInstall), abs(s.PostInstall), abs(s.PreRemove), abs(s.PostRemove)
}
