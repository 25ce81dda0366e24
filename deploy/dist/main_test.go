package dist

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// artifacts are what the tests check: those of STREAMD_DIST (a folder
// scripts/dist wrote, as CI does), or built here once.
type artifacts struct {
	build   Build
	bin     string // linux/GOARCH
	starter string // streamd init --data-dir /var/lib/streamd
	deb     string
	rpm     string
	image   string // the .oci.tar
	chart   string
	fromEnv bool
}

var (
	artifactsOnce sync.Once
	shared        artifacts
	sharedErr     error
	tmpRoot       string
)

func TestMain(m *testing.M) {
	var err error
	tmpRoot, err = os.MkdirTemp("", "streamd-dist-test-")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(tmpRoot)
	os.Exit(code)
}

func repoRoot() string {
	r, _ := filepath.Abs(filepath.Join("..", ".."))
	return r
}

func getArtifacts(t *testing.T) artifacts {
	t.Helper()
	artifactsOnce.Do(func() { shared, sharedErr = makeArtifacts() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func makeArtifacts() (artifacts, error) {
	a := artifacts{}
	if dir := os.Getenv("STREAMD_DIST"); dir != "" {
		var bj struct {
			Version, Commit string
			Epoch           int64
		}
		b, err := os.ReadFile(filepath.Join(dir, "build.json"))
		if err != nil {
			return a, fmt.Errorf("STREAMD_DIST=%s: %w (run scripts/dist)", dir, err)
		}
		if err := json.Unmarshal(b, &bj); err != nil {
			return a, err
		}
		a.build = Build{Root: repoRoot(), Version: bj.Version, Commit: bj.Commit, Epoch: time.Unix(bj.Epoch, 0).UTC()}
		a.fromEnv = true
		a.bin = filepath.Join(dir, "linux_"+runtime.GOARCH, "streamd")
		glob := func(pattern string) string {
			m, _ := filepath.Glob(filepath.Join(dir, pattern))
			if len(m) != 1 {
				return ""
			}
			return m[0]
		}
		rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
		a.deb, a.rpm = glob("*_"+runtime.GOARCH+".deb"), glob("*."+rpmArch+".rpm")
		a.image, a.chart = glob("*_linux_"+runtime.GOARCH+".oci.tar"), glob("streamd-*.tgz")
		if a.deb == "" || a.rpm == "" || a.image == "" || a.chart == "" {
			return a, fmt.Errorf("STREAMD_DIST=%s: not one .deb, .rpm, linux/%s .oci.tar and chart .tgz", dir, runtime.GOARCH)
		}
		a.starter = filepath.Join(tmpRoot, "starter")
		return a, Starter(a.bin, a.starter)
	}
	a.build = Build{Root: repoRoot(), Version: "0.0.0-test.1+g0123456789ab", Commit: "0123456789abcdef0123456789abcdef01234567", Epoch: time.Unix(1767225600, 0).UTC()}
	out := filepath.Join(tmpRoot, "dist")
	a.bin = filepath.Join(out, "linux_"+runtime.GOARCH, "streamd")
	if err := a.build.Binary(runtime.GOARCH, a.bin); err != nil {
		return a, err
	}
	a.starter = filepath.Join(tmpRoot, "starter")
	if err := Starter(a.bin, a.starter); err != nil {
		return a, err
	}
	pkgs, err := a.build.Packages(runtime.GOARCH, a.bin, a.starter, out)
	if err != nil {
		return a, err
	}
	a.deb, a.rpm = pkgs[0], pkgs[1]
	img, err := a.build.Image(runtime.GOARCH, a.bin, a.starter)
	if err != nil {
		return a, err
	}
	a.image = filepath.Join(out, "streamd_linux_"+runtime.GOARCH+".oci.tar")
	if err := WriteImage(img, "streamd:"+a.build.ImageTag(), a.image, a.build.Epoch); err != nil {
		return a, err
	}
	a.chart, err = a.build.Chart(out)
	return a, err
}

// needRoot skips a test that needs root, namespaces and mounts, unless
// STREAMD_REQUIRE_ALL=1 (CI, which runs as root), where that fails.
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("STREAMD_REQUIRE_ALL") == "1" {
			t.Fatalf("STREAMD_REQUIRE_ALL=1 and %s", why)
		}
		t.Skip(why)
	}
	if os.Geteuid() != 0 {
		missing("not root: this test mounts an overlay and makes namespaces")
	}
	for _, tool := range append([]string{"unshare", "nsenter", "mount", "ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			missing(tool + " is not installed")
		}
	}
}

// nsClient is an HTTP client whose connections are made in the network
// namespace of process pid (a loopback of its own).
func nsClient(pid int) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			// This thread enters the namespace for the socket() call and
			// goes back; were it to stay there, it would not be unlocked
			// and would end with this goroutine.
			runtime.LockOSThread()
			home, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer func() { _ = home.Close() }()
			f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
			if err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, err}
				return
			}
			defer func() { _ = f.Close() }()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, fmt.Errorf("setns: %w", err)}
				return
			}
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// waitHTTP polls url in pid's network namespace until ok says yes.
func waitHTTP(t *testing.T, pid int, url string, within time.Duration, ok func(status int, body []byte) bool) []byte {
	t.Helper()
	c := nsClient(pid)
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		resp, err := c.Get(url)
		if err == nil {
			var body []byte
			body, err = readAll(resp)
			if err == nil && ok(resp.StatusCode, body) {
				return body
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("GET %s: not as expected within %v; last: %.2000s", url, within, last)
	return nil
}

func readAll(resp *http.Response) ([]byte, error) {
	defer func() { _ = resp.Body.Close() }()
	return io.ReadAll(resp.Body)
}

// pipelineOut is a pipeline's records out in /pipelines.
func pipelineOut(body []byte, name string) (int64, error) {
	var ps []map[string]any
	if err := json.Unmarshal(body, &ps); err != nil {
		var wrapped struct {
			Pipelines []map[string]any `json:"pipelines"`
		}
		if err2 := json.Unmarshal(body, &wrapped); err2 != nil {
			return 0, err
		}
		ps = wrapped.Pipelines
	}
	for _, p := range ps {
		if p["name"] == name {
			for _, k := range []string{"records_out", "out"} {
				if v, ok := p[k].(float64); ok {
					return int64(v), nil
				}
			}
			return 0, fmt.Errorf("pipeline %s: no records_out in %v", name, p)
		}
	}
	return 0, fmt.Errorf("no pipeline %s", name)
}

// childOf is the first child of pid (unshare --fork's).
func childOf(t *testing.T, pid int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		var child int
		if _, err := fmt.Sscan(string(b), &child); err == nil {
			return child
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("process %d has no child", pid)
	return 0
}

// uidOf is the real user id of pid.
func uidOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return ""
}
