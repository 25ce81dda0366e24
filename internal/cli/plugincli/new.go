package plugincli

import (
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	sdkfiles "github.com/streamd/streamd/sdk"
)

// scaffold holds the files `streamd plugin new` writes: scaffold/LANG/ has a
// language's files (KIND.EXT is the source of that kind), scaffold/common
// the fixtures.
//
//go:embed scaffold
var scaffold embed.FS

// Languages and kinds of `streamd plugin new`.
var (
	NewLanguages = []string{"go", "rust", "c", "assemblyscript", "wat"}
	NewKinds     = []string{"transform", "codec", "sink"}
)

// lang says how a language's project is laid out.
type lang struct {
	name   string            // for people
	source string            // where KIND.EXT goes
	ext    string            // of the kind's source in scaffold/LANG
	files  map[string]string // other scaffold/LANG files -> where they go
	sdkRef string            // the file that names the SDK
}

var langs = map[string]lang{
	"go": {"Go", "main.go", ".go.tmpl", map[string]string{"go.mod.tmpl": "go.mod", "build.sh": "build.sh"}, "go.mod's replace directive"},
	"rust": {"Rust", "src/lib.rs", ".rs", map[string]string{
		"Cargo.toml":        "Cargo.toml",
		"cargo-config.toml": ".cargo/config.toml", "build.sh": "build.sh", "gitignore": ".gitignore",
	}, "Cargo.toml's streamd dependency"},
	"c":              {"C", "plugin.c", ".c", map[string]string{"build.sh": "build.sh"}, "build.sh's sdk="},
	"assemblyscript": {"AssemblyScript", "assembly/index.ts", ".ts", map[string]string{"package.json": "package.json", "build.sh": "build.sh", "gitignore": ".gitignore"}, "package.json's @streamd/sdk dependency"},
	"wat":            {"WebAssembly text (WAT)", "plugin.wat", ".wat", map[string]string{"build.sh": "build.sh"}, "nothing (a WAT plugin uses no SDK)"},
}

// newNameRE is what `plugin new` accepts as NAME: a manifest name (docs/abi.md
// section 5) that is also a Rust crate, npm package and Go module name.
var newNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

func newCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("streamd plugin new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	langName := fs.String("lang", "", "go, rust, c, assemblyscript or wat")
	kind := fs.String("kind", "", "transform, codec or sink")
	dir := fs.String("dir", "", "where to make the project (default ./NAME)")
	sdkDir := fs.String("sdk", os.Getenv("STREAMD_SDK"), "the sdk/ folder of a streamd checkout (default: $STREAMD_SDK, or found next to this streamd or above the current directory; else the SDK in this streamd, written into the project as "+EmbeddedSDKDir+"/)")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case name == "":
		return errors.New("missing NAME (usage: streamd plugin new --lang LANG --kind KIND NAME)")
	case !newNameRE.MatchString(name):
		return fmt.Errorf("NAME %q: want a lower-case letter, then lower-case letters, digits, '-' or '_' (64 at most)", name)
	case !slices.Contains(NewLanguages, *langName):
		return fmt.Errorf("--lang %q: want one of %s", *langName, strings.Join(NewLanguages, ", "))
	case !slices.Contains(NewKinds, *kind):
		return fmt.Errorf("--kind %q: want one of %s", *kind, strings.Join(NewKinds, ", "))
	}
	if *dir == "" {
		*dir = name
	}
	sdk := *sdkDir
	if sdk == "" && *langName != "wat" {
		// Outside a checkout: the SDK in this binary, written into the
		// project (NewProject with sdk "").
		sdk = findSDK()
	}
	if sdk != "" {
		abs, err := filepath.Abs(sdk)
		if err != nil {
			return err
		}
		sdk = abs
		if !isSDK(sdk) {
			return fmt.Errorf("--sdk %s: not a streamd sdk/ folder (no c/streamd.h, rust/Cargo.toml, go/streamd/go.mod, assemblyscript/package.json)", sdk)
		}
	}
	files, err := NewProject(name, *langName, *kind, sdk, streamdCommand())
	if err != nil {
		return err
	}
	if err := writeProject(*dir, files); err != nil {
		return err
	}
	build, test := projectCommands(*dir, *kind)
	var names []string
	for _, n := range sortedKeys(files) {
		if strings.HasPrefix(n, EmbeddedSDKDir+"/") {
			n = EmbeddedSDKDir + "/"
		}
		if len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	fmt.Fprintf(stdout, "made %s: a %s plugin in %s (%s)\nbuild it and run its test:\n  %s\n  %s\n",
		*dir, *kind, langs[*langName].name, strings.Join(names, ", "), build, test)
	return nil
}

// projectCommands are the two commands that build a new project in dir and
// run its test.
func projectCommands(dir, kind string) (build, test string) {
	return "cd " + shellQuote(dir) + " && ./build.sh", testCommand(streamdCommand(), kind)
}

func testCommand(streamd, kind string) string {
	cmd := streamd + " plugin test plugin.wasm --input testdata/in.jsonl --expect testdata/out.jsonl"
	if kind == "codec" {
		cmd += " --op encode"
	}
	return cmd
}

// streamdCommand is how to run this streamd: its path, unless it is a
// temporary `go run` binary.
func streamdCommand() string {
	exe, err := os.Executable()
	if err != nil || strings.Contains(exe, string(filepath.Separator)+"go-build") || strings.HasSuffix(filepath.Base(exe), ".test") {
		return "streamd"
	}
	if p, err := exec.LookPath("streamd"); err == nil {
		if q, err := filepath.EvalSymlinks(p); err == nil {
			if r, err := filepath.EvalSymlinks(exe); err == nil && q == r {
				return "streamd"
			}
		}
	}
	return shellQuote(exe)
}

func shellQuote(s string) string {
	if regexp.MustCompile(`^[A-Za-z0-9_./:=-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// findSDK looks for a streamd checkout's sdk/ folder next to the running
// binary (bin/streamd of a checkout) and then above the current directory.
func findSDK() string {
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		starts = append(starts, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for {
			if isSDK(filepath.Join(d, "sdk")) {
				return filepath.Join(d, "sdk")
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return ""
}

func isSDK(dir string) bool {
	for _, f := range []string{"c/streamd.h", "rust/Cargo.toml", "go/streamd/go.mod", "assemblyscript/package.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}

// EmbeddedSDKDir is the folder of a new project that holds the SDK that
// came in the streamd binary, when no checkout's is used.
const EmbeddedSDKDir = "streamd-sdk"

// NewProject returns the files of a new plugin project (path -> content):
// the source of a kind of plugin in a language, its build script, a
// fixture and its expected output, and a README. sdk is the absolute path
// of a streamd checkout's sdk/ folder, or "" for the SDK embedded in this
// binary, which then goes into the project under EmbeddedSDKDir (unused for
// wat); streamd is how the README runs streamd.
func NewProject(name, langName, kind, sdk, streamd string) (map[string]string, error) {
	l, ok := langs[langName]
	if !ok || !slices.Contains(NewKinds, kind) || !newNameRE.MatchString(name) {
		return nil, fmt.Errorf("no %s %s plugin named %q", langName, kind, name)
	}
	var sdkFiles map[string][]byte
	sdkWhere := "The SDK it uses is in the streamd checkout it was made from\n(`" + sdk + "`); " + l.sdkRef + " points there: change that line if you move either."
	ascFrom := func() []byte { b, _ := os.ReadFile(filepath.Join(sdk, "assemblyscript", "package.json")); return b }
	switch {
	case langName == "wat":
		sdkWhere = "A WAT plugin uses no SDK."
	case sdk == "":
		var err error
		if sdkFiles, err = sdkfiles.Files(langName); err != nil {
			return nil, err
		}
		sdk = "./" + EmbeddedSDKDir
		sdkWhere = "The SDK it uses is in " + EmbeddedSDKDir + "/: the one that came with the streamd\nthat made this project (`streamd version`); " + l.sdkRef + " points there."
		ascFrom = func() []byte { return sdkFiles["assemblyscript/package.json"] }
	}
	manifest := fmt.Sprintf(`{"name":"%s","kind":"%s","version":"0.1.0","abi":1}`, name, kind)
	repl := map[string]string{
		"@NAME@": name, "@CRATE@": strings.ReplaceAll(name, "-", "_"), "@KIND@": kind, "@LANG@": langName,
		"@LANG_NAME@": l.name, "@SDK@": sdk, "@SOURCE@": l.source, "@SDKREF@": l.sdkRef,
		"@MANIFEST@": strings.ReplaceAll(manifest, `"`, `\"`), "@MANIFEST_LEN@": strconv.Itoa(len(manifest)),
		"@ASC_VERSION@": ascVersion(ascFrom()), "@SDKWHERE@": sdkWhere,
		"@TEST@": testCommand(streamd, kind), "@OP@": "",
	}
	if kind == "codec" {
		repl["@OP@"] = " --op encode"
	}
	if langName == "wat" {
		common, err := scaffold.ReadFile("scaffold/wat/common.wat")
		if err != nil {
			return nil, err
		}
		repl["@COMMON@"] = strings.TrimRight(string(common), "\n")
	}
	switch kind {
	case "transform":
		repl["@WHAT@"] = "it upper-cases the ASCII letters of each record's value and rejects a record with a null value" +
			map[bool]string{true: " (a `prefix` in its config goes in front).", false: "."}[langName != "wat"]
		repl["@EXPECT@"] = `an output record, or {"error":"reason","kind":"rejected","input_offset":N} for a record the plugin rejects (kind "trap", "timeout" or "memory" when a call with the record crashes, hangs or runs out of memory; "input_offset" may be left out, and --messages also compares the text)`
	case "codec":
		repl["@WHAT@"] = "ENCODE and DECODE both reverse the bytes of a payload; a null payload (a tombstone) stays null."
		repl["@EXPECT@"] = `the record with its value encoded (--op encode; --op decode for the other way), or an error line {"error":"reason","kind":"rejected","input_offset":N}`
	case "sink":
		repl["@WHAT@"] = "it \"writes\" each record by logging its value (see it with -v) and refuses a record with a null value: put the durable write of your destination where the source says."
		repl["@EXPECT@"] = `{"written":true,"input_offset":N} for a record written, or an error line {"error":"reason","kind":"rejected","input_offset":N}`
	}
	repl["@TOML@"] = pipelineSnippet(name, kind)
	// scaffold/LANG/notes.md, if any, is a section of the README.
	repl["@NOTES@"] = ""
	if notes, err := scaffold.ReadFile("scaffold/" + langName + "/notes.md"); err == nil {
		repl["@NOTES@"] = "\n" + string(notes)
	}
	files := map[string]string{}
	add := func(from, to string) error {
		b, err := scaffold.ReadFile(from)
		if err != nil {
			return err
		}
		files[to] = expand(string(b), repl)
		return nil
	}
	if err := add("scaffold/"+langName+"/"+kind+l.ext, l.source); err != nil {
		return nil, err
	}
	for from, to := range l.files {
		if err := add("scaffold/"+langName+"/"+from, to); err != nil {
			return nil, err
		}
	}
	if err := add("scaffold/common/"+kind+".in.jsonl", "testdata/in.jsonl"); err != nil {
		return nil, err
	}
	if err := add("scaffold/common/"+kind+".out.jsonl", "testdata/out.jsonl"); err != nil {
		return nil, err
	}
	names := sortedKeys(files)
	if sdkFiles != nil {
		names = append(names, EmbeddedSDKDir+"/")
	}
	for p, b := range sdkFiles {
		files[EmbeddedSDKDir+"/"+p] = string(b)
	}
	repl["@FILES@"] = strings.Join(append(names, "README.md"), ", ")
	if err := add("scaffold/README.md", "README.md"); err != nil {
		return nil, err
	}
	return files, nil
}

func expand(s string, repl map[string]string) string {
	// The longest placeholders first, so that none is a prefix of another's
	// expansion's match (@SDK@ vs @SDKREF@).
	// A replacement may hold placeholders (@COMMON@): expand until none is
	// left (a few rounds at most).
	keys := sortedKeys(repl)
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	for range 3 {
		before := s
		for _, k := range keys {
			s = strings.ReplaceAll(s, k, repl[k])
		}
		if s == before {
			break
		}
	}
	return s
}

func pipelineSnippet(name, kind string) string {
	switch kind {
	case "codec":
		return `[[pipeline.transform]]
type = "codec"
plugin = "wasm:` + name + `/plugin.wasm"
mode = "encode"          # sets content-encoding: ` + name + `; "decode" decodes those`
	case "sink":
		return `[pipeline.sink]
type = "wasm"
plugin = "wasm:` + name + `/plugin.wasm"
# dirs = { "/out" = "out-dir" }   # what the sink may write to`
	}
	return `[[pipeline.transform]]
type = "wasm"
path = "` + name + `/plugin.wasm"
# config = { prefix = "> " }`
}

// ascVersion is the AssemblyScript compiler version the SDK is tested
// with, from the SDK's package.json.
func ascVersion(packageJSON []byte) string {
	const fallback = "0.28.20"
	var p struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if json.Unmarshal(packageJSON, &p) != nil || p.DevDependencies["assemblyscript"] == "" {
		return fallback
	}
	return p.DevDependencies["assemblyscript"]
}

// writeProject writes files under dir, which must not exist or be empty.
func writeProject(dir string, files map[string]string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty", dir)
	}
	for _, path := range sortedKeys(files) {
		full := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(path, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(files[path]), mode); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
