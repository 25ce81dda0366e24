package config

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// CheckHostDirs checks, on this machine, that every host directory a
// plugin's dirs grants (resolved against the config file's folder) exists
// and is a directory, naming FILE:LINE and the grant of each that is not.
// Parse does not look at the file system; `streamd lint` and `streamd test`
// call this, and a plugin's load refuses such a grant too.
func (c *Config) CheckHostDirs() error {
	k := &checker{c: c}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		for j := range p.Transforms {
			k.hostDirs(fmt.Sprintf("pipeline[%d].transform[%d]", i, j), p.Transforms[j].Dirs)
		}
		k.hostDirs(fmt.Sprintf("pipeline[%d].sink", i), p.Sink.Dirs)
	}
	return c.RedactError(k.err())
}

func (k *checker) hostDirs(at string, dirs map[string]string) {
	guests := make([]string, 0, len(dirs))
	for g := range dirs {
		guests = append(guests, g)
	}
	slices.Sort(guests)
	for _, g := range guests {
		// The host side is "DIR", "DIR:rw" or "DIR:ro" (runtime.DirGrant).
		dir, ok := strings.CutSuffix(dirs[g], ":ro")
		if !ok {
			dir, _ = strings.CutSuffix(dirs[g], ":rw")
		}
		path := k.c.Resolve(dir)
		fi, err := os.Stat(path)
		switch {
		case dir == "":
			k.bad(at+".dirs", "%q = %q: no host directory (allowed: \"DIR\", \"DIR:rw\" or \"DIR:ro\")", g, dirs[g])
		case err != nil && os.IsNotExist(err):
			k.bad(at+".dirs", "%q = %q: %s does not exist (allowed: an existing directory; a grant is not created)", g, dirs[g], path)
		case err != nil:
			k.bad(at+".dirs", "%q = %q: %v", g, dirs[g], err)
		case !fi.IsDir():
			k.bad(at+".dirs", "%q = %q: %s is not a directory (allowed: an existing directory)", g, dirs[g], path)
		}
	}
}
