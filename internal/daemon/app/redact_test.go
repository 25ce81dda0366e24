package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins/load"
)

// TestStatusRedactsInterpolated: what came into the config from ${ENV}
// or ${file:} is not shown by /v1/status, /readyz or /pipelines, even
// where an error quotes it (a broker address in a connection error, a
// secret file's content in a refused reload's error): they say where it
// came from instead.
func TestStatusRedactsInterpolated(t *testing.T) {
	dir := t.TempDir()
	broker := freePort(t) // nothing listens there: the pipeline cannot connect
	t.Setenv("STREAMD_TEST_BROKER", broker)
	secret := filepath.Join(dir, "mechanism")
	if err := os.WriteFile(secret, []byte("hunter2-in-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	src := fmt.Sprintf(`
[kafka]
brokers = ["${STREAMD_TEST_BROKER}"]
[admin]
listen = %q
[[pipeline]]
name = "orders"
[pipeline.source]
type = "kafka"
topics = ["orders"]
group = "g"
[pipeline.sink]
type = "drop"
`, addr)
	file := filepath.Join(dir, "streamd.toml")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Build(context.Background(), cfg, slog.New(slog.DiscardHandler), load.Open, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("Run: %v", err)
		}
		testenv.Close(t, context.Background(), a)
	}()
	get := func(path string) string {
		t.Helper()
		res, err := http.Get("http://" + addr + path)
		for start := time.Now(); err != nil && time.Since(start) < 30*time.Second; res, err = http.Get("http://" + addr + path) {
			time.Sleep(50 * time.Millisecond) // the admin server is starting
		}
		if err != nil {
			t.Fatal(err)
		}
		defer testenv.Ignore(res.Body.Close)
		b, _ := io.ReadAll(res.Body)
		return unescapeJSON(string(b))
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(get("/v1/status"), `"reason"`) || !strings.Contains(get("/readyz"), "not ready") {
		if time.Now().After(deadline) {
			t.Fatalf("no reason in the status after 60 s:\n%s", get("/v1/status"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The reason quotes the brokers' address only once the client tried
	// it: wait for that, then look.
	want := "<from ${STREAMD_TEST_BROKER}>"
	for !strings.Contains(get("/v1/status"), want) && !strings.Contains(get("/v1/status"), broker) {
		if time.Now().After(deadline) {
			t.Fatalf("the reason never names the broker:\n%s", get("/v1/status"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, path := range []string{"/v1/status", "/readyz", "/pipelines", "/v1/pipelines/orders"} {
		if body := get(path); strings.Contains(body, broker) || !strings.Contains(body, want) {
			t.Errorf("%s quotes the broker from the environment, or does not say where it came from:\n%s", path, body)
		}
	}

	// A reload refused because of a value from a file.
	bad := strings.Replace(src, "[admin]", "[kafka.sasl]\nmechanism = \"${file:"+secret+"}\"\nusername = \"u\"\npassword = \"p\"\n[admin]", 1)
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := http.Post("http://"+addr+"/v1/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	b = []byte(unescapeJSON(string(b)))
	if res.StatusCode != 422 || strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), "<from ${file:"+secret+"}>") {
		t.Errorf("reload: %s %s", res.Status, b)
	}
	if body := get("/v1/status"); strings.Contains(body, "hunter2") || !strings.Contains(body, `"reload_error"`) {
		t.Errorf("the refused reload's error in the status:\n%s", body)
	}
}

// unescapeJSON undoes encoding/json's HTML escapes of < and >.
func unescapeJSON(s string) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(s)
}
