package testcli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
)

// hangConfig: Wasm stages at the default limits (timeout 5s, batches of
// 1024) whose guest hangs on every record (misbehave.wat, mode loop) or on
// one (poison.wat, a value "hang"), under the dlq and stop policies.
const hangConfig = `[kafka]
brokers = ["127.0.0.1:1"]

[[pipeline]]
name = "hang-all-dlq"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
path = "misbehave.wasm"
config = { mode = "loop" }
[pipeline.sink]
type = "kafka"
topic = "out"
[pipeline.errors]
policy = "dlq"
dlq_topic = "dead"
[[pipeline.test]]
input = "all.jsonl"
error = "timed out on 2 records of one batch alone: the plugin hangs, whatever the record"

[[pipeline]]
name = "hang-all-stop"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
path = "misbehave.wasm"
config = { mode = "loop" }
[pipeline.sink]
type = "kafka"
topic = "out"
[[pipeline.test]]
input = "all.jsonl"
error = "record /0@0 rejected by wasm-0: plugin call timed out after 5s"

[[pipeline]]
name = "hang-one-dlq"
[pipeline.source]
type = "kafka"
topics = ["in"]
group = "g"
[[pipeline.transform]]
type = "wasm"
path = "poison.wasm"
[pipeline.sink]
type = "kafka"
topic = "out"
[pipeline.errors]
policy = "dlq"
dlq_topic = "dead"
[[pipeline.test]]
input = "one.jsonl"
output = "one-out.jsonl"
dlq = "one-dlq.jsonl"
`

// TestHangingGuestBounded: at the default
// settings (timeout 5s, batch 1024) a guest that hangs on every record
// costs the batch's call and at most two calls with one record (the stage
// then fails: the plugin hangs, not the records; nothing is acked), 2
// calls under stop (it stops at the first record that fails alone), and one
// record that hangs among good ones goes to the DLQ while the others flow.
// Without the bound, isolation took one timeout per record: 1025 x 5s.
func TestHangingGuestBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs guests into the 5s timeout (about 40 s)")
	}
	dir := t.TempDir()
	for _, name := range []string{"poison", "misbehave"} {
		testenv.Wat2Wasm(t, "../../../examples/wasm/wat/"+name+".wat", filepath.Join(dir, name+".wasm"))
	}
	var all, one, oneOut strings.Builder
	for i := range 1024 {
		fmt.Fprintf(&all, `{"value":"r-%d","offset":%d}`+"\n", i, i)
		v := fmt.Sprintf("r-%d", i)
		if i == 500 {
			v = "hang"
		} else {
			fmt.Fprintf(&oneOut, `{"value":"%s","offset":%d}`+"\n", v, i)
		}
		fmt.Fprintf(&one, `{"value":"%s","offset":%d}`+"\n", v, i)
	}
	files := map[string]string{
		"streamd.toml": hangConfig, "all.jsonl": all.String(), "one.jsonl": one.String(), "one-out.jsonl": oneOut.String(),
		"one-dlq.jsonl": `{"value":"hang","headers":{"streamd-error":"plugin call timed out after 5s","streamd-stage":"wasm-0","streamd-plugin":"poison","streamd-source-topic":"","streamd-source-partition":"0","streamd-source-offset":"500"}}` + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var o, e bytes.Buffer
	start := time.Now()
	code := Main(context.Background(), []string{"--timeout", "3m", filepath.Join(dir, "streamd.toml")}, &o, &e)
	t.Logf("streamd test took %v:\n%s%s", time.Since(start).Round(time.Millisecond), o.String(), e.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	// Each test's time, against its bound: n timed-out calls of
	// plugins.DefaultTimeout, plus 10 s for the quick calls and a loaded
	// machine.
	bounds := map[string]int{"hang-all-dlq": 3, "hang-all-stop": 2, "hang-one-dlq": 2}
	re := regexp.MustCompile(`(?m)^ok \S+ (\S+)/\S+: .*, ([0-9.]+m?s)(;|$)`)
	seen := 0
	for _, m := range re.FindAllStringSubmatch(o.String(), -1) {
		took, err := time.ParseDuration(m[2])
		if err != nil {
			t.Fatal(err)
		}
		bound := time.Duration(bounds[m[1]])*plugins.DefaultTimeout + 10*time.Second
		if took > bound {
			t.Errorf("%s took %v, more than %v", m[1], took, bound)
		}
		seen++
	}
	if seen != 3 {
		t.Fatalf("found %d test times in the output, want 3", seen)
	}
}
