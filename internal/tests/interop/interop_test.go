package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
)

var compressions = []string{"gzip", "snappy", "lz4", "zstd"}

const perTopic = 40

// TestKcatThroughDaemon runs `streamd run` with one pass-through pipeline per
// Kafka compression codec (kcat produces with -z C, the streamd sink writes
// with compression C) and one pipeline that gzip-encodes values with the
// built-in codec. kcat consumes every output; keys, values and headers must
// come out as they went in, and the gzip payloads must decode with gzip(1).
func TestKcatThroughDaemon(t *testing.T) {
	kcat := testenv.Tool(t, "kcat")
	gzipTool := testenv.Tool(t, "gzip")
	broker := testenv.Kafka(t)
	bin := buildStreamd(t)

	in := map[string]string{}
	out := map[string]string{}
	for _, c := range compressions {
		in[c] = testenv.Topic(t, "interop-in-"+c)
		out[c] = testenv.Topic(t, "interop-out-"+c)
		broker.CreateTopic(t, in[c], 2)
	}
	encOut := testenv.Topic(t, "interop-gzip-encoded")

	dir := t.TempDir()
	admin := freeAddr(t)
	cfg := configTOML(broker.Seeds, admin, dir, in, out, encOut)
	cfgPath := filepath.Join(dir, "streamd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := startDaemon(t, bin, cfgPath, admin)

	// kcat produces perTopic records with two headers into each input.
	want := map[string]record{}
	for _, c := range compressions {
		var lines bytes.Buffer
		for i := range perTopic {
			k := fmt.Sprintf("key-%s-%03d", c, i)
			v := fmt.Sprintf(`{"n":%d,"codec":"%s","text":"%s"}`, i, c, strings.Repeat("abc", i))
			fmt.Fprintf(&lines, "%s\t%s\n", k, v)
			want[k] = record{Key: k, Value: v, Headers: []string{"trace-id", "t-" + c, "app", "kcat"}}
		}
		cmd := exec.Command(kcat, "-b", strings.Join(broker.Seeds, ","), "-P", "-t", in[c], "-K", "\t",
			"-z", c, "-H", "trace-id=t-"+c, "-H", "app=kcat")
		cmd.Stdin = &lines
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P -z %s: %v\n%s", c, err, b)
		}
	}

	for _, c := range compressions {
		t.Run("passthrough-"+c, func(t *testing.T) {
			got := consume(t, kcat, broker.Seeds, out[c], perTopic)
			for _, r := range got {
				w, ok := want[r.Key]
				if !ok || !strings.HasPrefix(r.Key, "key-"+c+"-") {
					t.Fatalf("unexpected record %+v in %s", r, out[c])
				}
				if r.Value != w.Value {
					t.Errorf("%s: value %q, want %q", r.Key, r.Value, w.Value)
				}
				if !slices.Equal(r.Headers, w.Headers) {
					t.Errorf("%s: headers %q, want %q", r.Key, r.Headers, w.Headers)
				}
			}
			if n := countDistinct(got); n != perTopic {
				t.Errorf("%d distinct keys out of %d", n, perTopic)
			}
		})
	}

	t.Run("codec-gzip-encode", func(t *testing.T) {
		cl := broker.Client(t, kgo.ConsumeTopics(encOut), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		seen := map[string]bool{}
		for len(seen) < perTopic {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("%d of %d encoded records after 60s", len(seen), perTopic)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				w := want[string(r.Key)]
				enc := ""
				for _, h := range r.Headers {
					if h.Key == "content-encoding" {
						enc = string(h.Value)
					}
				}
				if enc != "gzip" {
					t.Errorf("%s: content-encoding %q, want gzip", r.Key, enc)
				}
				cmd := exec.Command(gzipTool, "-dc")
				cmd.Stdin = bytes.NewReader(r.Value)
				plain, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s: gzip -dc: %v", r.Key, err)
				}
				if string(plain) != w.Value {
					t.Errorf("%s: gzip -dc gave %q, want %q", r.Key, plain, w.Value)
				}
				seen[string(r.Key)] = true
			})
		}
	})

	if code := stop(); code != 0 {
		t.Errorf("streamd run exited %d after SIGTERM, want 0", code)
	}
}

type record struct {
	Key     string
	Value   string
	Headers []string // name, value, name, value...
}

// consume reads n records from topic with kcat -J (all partitions, from the
// beginning), waiting at most a minute.
func consume(t *testing.T, kcat string, seeds []string, topic string, n int) []record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", strings.Join(seeds, ","), "-C", "-t", topic,
		"-o", "beginning", "-c", fmt.Sprint(n), "-J", "-q")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -C -t %s: %v (ctx %v)\nstdout: %s\nstderr: %s", topic, err, ctx.Err(), b, stderr.Bytes())
	}
	var recs []record
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m struct {
			Key     *string  `json:"key"`
			Payload *string  `json:"payload"`
			Headers []string `json:"headers"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("kcat -J line %q: %v", line, err)
		}
		if m.Key == nil || m.Payload == nil {
			t.Fatalf("null key or value in %s: %s", topic, line)
		}
		recs = append(recs, record{Key: *m.Key, Value: *m.Payload, Headers: m.Headers})
	}
	if len(recs) != n {
		t.Fatalf("kcat read %d records from %s, want %d", len(recs), topic, n)
	}
	return recs
}

func countDistinct(rs []record) int {
	m := map[string]bool{}
	for _, r := range rs {
		m[r.Key] = true
	}
	return len(m)
}

func configTOML(seeds []string, admin, dir string, in, out map[string]string, encOut string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "data_dir = %q\n\n[admin]\nlisten = %q\n\n[log]\nlevel = \"info\"\n\n", filepath.Join(dir, "data"), admin)
	q := make([]string, len(seeds))
	for i, s := range seeds {
		q[i] = fmt.Sprintf("%q", s)
	}
	fmt.Fprintf(&b, "[kafka]\nbrokers = [%s]\npartitions = 2\n\n", strings.Join(q, ", "))
	for _, c := range compressions {
		fmt.Fprintf(&b, `[[pipeline]]
name = "pass-%[1]s"
commit_interval = "100ms"
[pipeline.source]
type = "kafka"
topics = [%[2]q]
group = "interop-pass-%[1]s-%[4]d"
[pipeline.sink]
type = "kafka"
topic = %[3]q
compression = %[1]q

`, c, in[c], out[c], time.Now().UnixNano())
	}
	fmt.Fprintf(&b, `[[pipeline]]
name = "encode-gzip"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "interop-encode-%d"
[[pipeline.transform]]
type = "codec"
codec = "gzip"
mode = "encode"
[pipeline.sink]
type = "kafka"
topic = %q
`, in["zstd"], time.Now().UnixNano(), encOut)
	return b.String()
}

// buildStreamd builds cmd/streamd into a temp dir (fast when cached).
func buildStreamd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "streamd")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/streamd/streamd/cmd/streamd")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/streamd: %v\n%s", err, b)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(l.Close)
	return l.Addr().String()
}

// startDaemon runs `streamd run -c cfg` until /readyz answers 200. stop sends
// SIGTERM and returns the exit code; the log is printed if the test failed.
func startDaemon(t *testing.T, bin, cfg, admin string) (stop func() int) {
	t.Helper()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "run", "-c", cfg)
	cmd.Stdout = &logs
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		err := cmd.Wait()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		done <- code
	}()
	exited := -2
	stop = func() int {
		if exited != -2 {
			return exited
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case exited = <-done:
		case <-time.After(45 * time.Second):
			_ = cmd.Process.Kill()
			exited = <-done
			t.Errorf("streamd did not exit within 45s of SIGTERM")
		}
		return exited
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("streamd log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop
			}
		}
		select {
		case code := <-done:
			exited = code
			t.Fatalf("streamd run exited with %d before it was ready:\n%s", code, logs.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("streamd not ready within 60s (last: %v):\n%s", err, logs.String())
		}
	}
}
