package fluidcli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// subjectManifests registers versions of a JSON Schema subject in the
// real registry (level NONE while registering, then level) and writes
// Fluid manifests v1..len(schemas) naming it (a downgrade per changed
// version, checked with --no-plugins).
func subjectManifests(t *testing.T, url, topic string, level sr.CompatibilityLevel, register int, schemas ...string) (dir, subject string) {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	subject = testenv.Topic(t, "fluid-cli") + "-value"
	dir = t.TempDir()
	for i, s := range schemas {
		v := i + 1
		if v <= register {
			if _, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: s, Type: sr.TypeJSON}, -1, -1); err != nil {
				t.Fatal(err)
			}
			if v == 1 {
				if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, subject); r[0].Err != nil {
					t.Fatal(r[0].Err)
				}
			}
		}
		vd := filepath.Join(dir, fmt.Sprintf("v%d", v))
		if err := os.MkdirAll(vd, 0o755); err != nil {
			t.Fatal(err)
		}
		dg := ""
		if v > 1 {
			dg = `,"downgrade":"wasm:down.wasm"`
		}
		if err := os.WriteFile(filepath.Join(vd, "manifest.json"), fmt.Appendf(nil, `{"version":%d,"topics":{%q:{"subject":%q%s}}}`, v, topic, subject, dg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: level}, subject); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	return dir, subject
}

const (
	cliV1 = `{"type":"object","required":["id"],"properties":{"id":{"type":"integer"}}}`
	cliV2 = `{"type":"object","required":["id","n"],"properties":{"id":{"type":"integer"},"n":{"type":"integer"}}}`
)

// TestFluidCheckRegistry: `streamd fluid check` reads manifests that name
// a registry subject from --registry URL or the registry of -c FILE; without
// one, or with a version the subject lacks, it says so and exits 1.
// registryConfig is a valid config (kafka -> kafka, no broker
// connection) that a test adds its [schema_registry] to.
const registryConfig = `[kafka]
brokers = ["127.0.0.1:1"]
[[pipeline]]
name = "orders"
[pipeline.source]
type = "kafka"
topics = ["orders"]
group = "g"
[pipeline.sink]
type = "kafka"
topic = "orders.v1"
[pipeline.errors]
policy = "stop"
`

func TestFluidCheckRegistry(t *testing.T) {
	url := testenv.SchemaRegistry(t)
	dir, _ := subjectManifests(t, url, "orders", sr.CompatBackward, 2, cliV1, cliV2)
	cfg := filepath.Join(t.TempDir(), "streamd.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "%s[schema_registry]\nurl = %q\n", registryConfig, url), 0o644); err != nil {
		t.Fatal(err)
	}
	short, subject := subjectManifests(t, url, "orders", sr.CompatBackward, 1, cliV1, cliV2)
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no registry", []string{dir}, 1, "needs a schema registry"},
		{"--registry", []string{"--registry", url, dir}, 0, "ok (versions 1..2, topics [orders])"},
		{"-c", []string{"-c", cfg, dir}, 0, "ok (versions 1..2, topics [orders])"},
		{"both", []string{"--registry", url, "-c", cfg, dir}, 2, "not both"},
		{"bad url", []string{"--registry", "127.0.0.1:1", dir}, 2, "want an http:// or https:// URL"},
		{"version missing", []string{"--registry", url, short}, 1, "topics.orders.subject " + subject + " version 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), append([]string{"check", "--no-plugins"}, tt.args...), &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, tt.code, tt.want, out)
			}
		})
	}
}

// TestFluidBridgeRegistry: `streamd fluid bridge --registry URL` loads
// subject manifests and answers /fluid/compatible by the registry's check
// (under BACKWARD an open v1 reads v2 records though the schemas differ).
func TestFluidBridgeRegistry(t *testing.T) {
	url := testenv.SchemaRegistry(t)
	k := testenv.Kafka(t)
	topic := testenv.Topic(t, "orders")
	k.CreateTopic(t, topic, 1)
	dir, _ := subjectManifests(t, url, topic, sr.CompatBackward, 2, cliV1, cliV2)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- fluidBridge(ctx, []string{"--brokers", strings.Join(k.Seeds, ","), "--listen", "127.0.0.1:0", "--metadata", dir,
			"--state-topic", testenv.Topic(t, "fluid-state"), "--registry", url}, pw, io.Discard)
		_ = pw.Close() // the reader sees EOF; PipeWriter.Close returns nil
	}()
	defer func() {
		cancel()
		_, _ = io.Copy(io.Discard, pr) // drain the bridge's output until it exits
		if code := <-done; code != 0 {
			t.Errorf("bridge exited %d", code)
		}
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, _, _ := strings.Cut(strings.TrimPrefix(line, "fluid bridge on "), " ")
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(addr + "/fluid/compatible?topic=" + topic + "&observed-schema-version=2&compatible-schema-version=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "{\"compatible\":true}\n" {
		t.Fatalf("%s: %d %s", line, resp.StatusCode, body)
	}
}
