package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestExactlyOnceNativePluginCrashes: an exactly-once pipeline whose
// transform is a native (out-of-process) plugin that crashes three times
// while records flow. Each crash is a transient fault of the plugin, not a
// verdict on a record: the supervisor starts the process again and the
// batch is transformed again inside the same transaction, so a
// read_committed reader sees every record once, transformed, and nothing
// goes to the DLQ.
func TestExactlyOnceNativePluginCrashes(t *testing.T) {
	plugin := filepath.Join(t.TempDir(), "testplugin")
	if out, err := exec.Command("go", "build", "-o", plugin, "github.com/streamd/streamd/plugins/native/internal/testplugin").CombinedOutput(); err != nil {
		t.Fatalf("build test plugin: %v\n%s", err, out)
	}
	b := testenv.Kafka(t)
	in, out, dlq := testenv.Topic(t, "in"), testenv.Topic(t, "out"), testenv.Topic(t, "dlq")
	for _, tp := range []string{in, out, dlq} {
		b.CreateTopic(t, tp, 4)
	}
	crash := filepath.Join(t.TempDir(), "crash") // the plugin exits at its next call when this file exists, removing it
	cfg := writeConfig(t, fmt.Sprintf("data_dir = %q\n", t.TempDir())+brokersTOML(b)+fmt.Sprintf(`
[[pipeline]]
name = "native-eo"
delivery = "exactly-once"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[[pipeline.transform]]
type = "native"
plugin = "native:%s"
[pipeline.transform.config]
crash_file = %q
[pipeline.sink]
type = "kafka"
topic = %q
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
`, in, testenv.Topic(t, "g"), plugin, crash, out, dlq))
	d := start(t, cfg)
	defer d.stop(t)

	adm := kadm.NewClient(b.Client(t))
	outEnd := func() int64 { return endSum(adm, out) }
	// written waits until the output holds n records at least (its end
	// offsets count the transaction markers too).
	written := func(what string, n int) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); outEnd() < int64(n); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the output holds %d of %d records after 90 s", what, outEnd(), n)
			}
		}
	}
	pcl := b.Client(t)
	const rounds, per = 4, 5000
	total := 0
	for r := range rounds {
		produce(t, pcl, in, total, per)
		total += per
		written(fmt.Sprintf("round %d", r), total)
		if r == rounds-1 {
			break
		}
		if err := os.WriteFile(crash, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		produce(t, pcl, in, total, 1) // the call it crashes on, done again by the restarted plugin
		total++
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(crash); os.IsNotExist(err) {
				break // the plugin took it and exited
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the plugin did not take the crash file in 90 s", r)
			}
		}
		written(fmt.Sprintf("after crash %d", r+1), total)
	}
	n := total
	seen := readSeq(t, b, out, true, n, 3*time.Minute)
	missing, dup := 0, 0
	for i := range n {
		switch c := seen[i]; {
		case c == 0:
			missing++
		case c > 1:
			dup += c - 1
		}
	}
	dead := readSeq(t, b, dlq, true, 0, 5*time.Second)
	restarts := strings.Count(d.log.String(), "native plugin process restarted")
	t.Logf("%d records: %d missing, %d duplicates (read_committed), %d in the DLQ; plugin restarted %d times", n, missing, dup, len(dead), restarts)
	if missing > 0 || dup > 0 || len(dead) > 0 {
		t.Fatalf("not exactly once through a crashing native plugin: %d missing, %d duplicates, %d dead letters", missing, dup, len(dead))
	}
	if restarts < rounds-1 {
		t.Fatalf("the plugin was restarted %d times, want %d (the crashes did not happen: the test proves nothing)", restarts, rounds-1)
	}
	// Transformed by the plugin: upper-cased values.
	_, recs := consumeAll(t, b, out, 1, 30*time.Second)
	if len(recs) == 0 || !bytes.HasPrefix(recs[0].Value, []byte(`{"ID":`)) {
		t.Fatalf("output not transformed by the plugin: %d records read", len(recs))
	}
}
