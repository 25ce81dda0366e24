package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// get returns the body of an admin server's GET url.
func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(res.Body.Close)
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, res.StatusCode, err, b)
	}
	return string(b)
}

// metricValue is metric as a number, -1 if absent.
func metricValue(t *testing.T, addr, series string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(metric(t, addr, series), 64)
	if err != nil {
		return -1
	}
	return v
}

// TestEmbeddedRetentionThroughDaemon: `streamd run` with its embedded
// broker (the quickstart's shape, the broker in the daemon's own process)
// deletes records older than kafka.embedded.retention within one check
// interval, on a topic created with no configs; /metrics and the
// console's /ui/api/broker show the broker's disk, index estimate,
// retained range and what retention deleted.
func TestEmbeddedRetentionThroughDaemon(t *testing.T) {
	admin, kafkaAddr := freePort(t), freePort(t)
	const check = 500 * time.Millisecond
	cfg := writeConfig(t, fmt.Sprintf(`data_dir = %q
[admin]
listen = %q
[kafka.embedded]
listen = %q
retention = "1h"
retention_check_interval = %q
[kafka]
partitions = 1
[[pipeline]]
name = "gen"
[pipeline.source]
type = "generate"
rate = 200
[pipeline.sink]
type = "kafka"
topic = "fresh"
`, t.TempDir(), admin, kafkaAddr, check))
	d := start(t, cfg)
	b := &testenv.Broker{Seeds: []string{kafkaAddr}}
	waitReady(t, d, admin)
	cl := b.Client(t, kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 110 {
		ts := old
		if i >= 100 {
			ts = time.Time{}
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "old", Value: []byte(strconv.Itoa(i)), Timestamp: ts}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	written := time.Now()
	adm := kadm.NewClient(cl)
	for {
		starts, err := adm.ListStartOffsets(ctx, "old")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := starts.Lookup("old", 0); o.Offset == 100 {
			break
		}
		if time.Since(written) > check+2*time.Second {
			t.Fatalf("log start of old %v after %v, want 100: the 2020 records deleted within a check interval (%v)", starts, time.Since(written), check)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the 2020 records were deleted %v after they were written (check interval %v)", time.Since(written).Round(time.Millisecond), check)
	time.Sleep(2 * check) // the figures of a check after the delete
	for _, s := range []string{`streamd_embedded_retention_deleted_records_total{reason="time",topic="old"}`,
		`streamd_embedded_log_start_offset{partition="0",topic="old"}`} {
		if v := metricValue(t, admin, s); v != 100 {
			t.Errorf("%s = %v, want 100", s, v)
		}
	}
	for _, s := range []string{"streamd_embedded_disk_bytes", "streamd_embedded_disk_budget_bytes", "streamd_embedded_index_memory_bytes",
		`streamd_embedded_log_end_offset{partition="0",topic="fresh"}`, `streamd_embedded_oldest_record_timestamp_seconds{topic="fresh"}`} {
		if v := metricValue(t, admin, s); v <= 0 {
			t.Errorf("%s = %v, want > 0", s, v)
		}
	}
	var st struct {
		DiskBytes int64 `json:"disk_bytes"`
		Topics    []struct {
			Topic    string           `json:"topic"`
			Records  int64            `json:"records"`
			Deleted  map[string]int64 `json:"deleted_records"`
			OldestMs int64            `json:"oldest_timestamp_ms"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+admin+"/ui/api/broker")), &st); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tp := range st.Topics {
		if tp.Topic == "old" {
			found = tp.Records == 10 && tp.Deleted["time"] == 100 && tp.OldestMs > written.Add(-time.Minute).UnixMilli()
			t.Logf("/ui/api/broker: old: %+v", tp)
		}
	}
	if !found || st.DiskBytes <= 0 {
		t.Fatalf("/ui/api/broker: %+v", st)
	}
	d.stop(t)
}

// waitReady waits until the daemon's /readyz answers 200.
func waitReady(t *testing.T, d *daemon, admin string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get("http://" + admin + "/readyz"); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 60s:\n%s", tail(d.log.String(), 3000))
		}
	}
}

// TestBrokerCommandMetrics: `streamd broker --metrics ADDR` serves the
// broker's figures.
func TestBrokerCommandMetrics(t *testing.T) {
	addr, metrics := freePort(t), freePort(t)
	cmd := exec.Command(streamdBin, "broker", "--listen", addr, "--data-dir", t.TempDir(), "--metrics", metrics, "--retention", "1h",
		"--retention-check-interval", "200ms")
	var log lockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := http.Get("http://" + metrics + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if strings.Contains(string(b), "streamd_embedded_disk_bytes ") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no streamd_embedded_disk_bytes at %s after 30s:\n%s", metrics, log.String())
		}
	}
}
