package initcli

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// starter is what `streamd init` writes: a config with an embedded broker,
// a generator and a pipeline through a Wasm plugin (built from its WAT,
// which init_test.go checks), the pipeline's test and a README.
//
//go:embed starter
var starter embed.FS

// starterDataDir is the line of starter/streamd.toml that --data-dir
// replaces.
const starterDataDir = `data_dir = "data"`

// Main is `streamd init [--data-dir DIR] FOLDER`: it writes the starter
// into FOLDER; exit 0, or 2 with what is wrong.
func Main(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("streamd init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: streamd init [--data-dir DIR] FOLDER

Writes a starter into FOLDER (which must not exist or be empty): streamd.toml
with an embedded Kafka broker, a generator and a pipeline through a Wasm
plugin (plugins/upper.wasm and its source upper.wat), the pipeline's test and
a README. streamd run -c FOLDER/streamd.toml runs it as it is.

`)
		fs.PrintDefaults()
	}
	dataDir := fs.String("data-dir", "data", "the config's data_dir (relative to the config file, or absolute, such as /var/lib/streamd)")
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if dir == "" && fs.NArg() > 0 {
		dir = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return 2
		}
	}
	if dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if err := writeStarter(dir, *dataDir); err != nil {
		fmt.Fprintf(stderr, "streamd init: %v\n", err)
		return 2
	}
	cfg := filepath.Join(dir, "streamd.toml")
	fmt.Fprintf(stdout, "wrote %s: streamd.toml, plugins/upper.wasm (and its source upper.wat), testdata/, README.md\nrun it:   streamd run -c %s\ntest it:  streamd test %s\n", dir, cfg, cfg)
	return 0
}

func writeStarter(dir, dataDir string) error {
	if dataDir == "" || strings.ContainsAny(dataDir, "\"\\") || strings.ContainsFunc(dataDir, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fmt.Errorf("--data-dir %q: want a path without quotes, backslashes or control characters", dataDir)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fs.WalkDir(starter, "starter", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(p, "starter"), "/")))
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := starter.ReadFile(p)
		if err != nil {
			return err
		}
		if p == "starter/streamd.toml" {
			if !strings.Contains(string(b), starterDataDir) {
				return fmt.Errorf("starter/streamd.toml has no line %s", starterDataDir)
			}
			b = []byte(strings.Replace(string(b), starterDataDir, `data_dir = "`+dataDir+`"`, 1))
		}
		return os.WriteFile(to, b, 0o644)
	})
}
