package opscli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/cli/opscli"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// TestDLQCommands runs `streamd dlq ls|show|replay --to source` against a
// dead-letter topic of 40 dead letters (every 4th from stage "b"), the
// last truncated.
func TestDLQCommands(t *testing.T) {
	b := testenv.Kafka(t)
	src, dlqTopic := testenv.Topic(t, "src"), testenv.Topic(t, "dlq")
	b.CreateTopic(t, src, 2)
	b.CreateTopic(t, dlqTopic, 1)
	cl := b.Client(t)
	var krs []*kgo.Record
	for i := range 40 {
		in := record.Record{Topic: src, Partition: int32(i % 2), Offset: int64(100 + i), Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(fmt.Sprintf("value %d", i))}
		stage := "a"
		if i%4 == 0 {
			stage = "b"
		}
		d := pipeline.DeadLetter(in, stage, "plug", errors.New("bad thing number "+fmt.Sprint(i)))
		if i == 39 {
			d.Value = nil
			d.SetHeader(pipeline.HeaderTruncated, []byte("value"))
		}
		kr := &kgo.Record{Topic: dlqTopic, Key: d.Key, Value: d.Value}
		for _, h := range d.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		krs = append(krs, kr)
	}
	if err := cl.ProduceSync(context.Background(), krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "streamd.toml")
	body := fmt.Sprintf(`[kafka]
brokers = [%q]
[[pipeline]]
name = "p"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "g"
[pipeline.sink]
type = "drop"
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
[[pipeline]]
name = "nodlq"
[pipeline.source]
type = "generate"
[pipeline.sink]
type = "drop"
`, strings.Join(b.Seeds, `", "`), src, dlqTopic)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		code := opscli.DLQ(ctx, args, &out, &errb)
		return code, out.String(), errb.String()
	}
	tests := []struct {
		name  string
		args  []string
		code  int
		want  []string // in stdout (stderr when code is 2)
		lines int      // stdout lines, when > 0
	}{
		{"ls", []string{"ls", "-c", cfg, "p"}, 0, []string{"PARTITION@OFFSET", "0@5", src + "/1@105", "key-5", "bad thing number 5", "[truncated: value]", "40 dead letters in " + dlqTopic}, 42},
		{"ls by stage, flags after the pipeline", []string{"ls", "p", "-c", cfg, "--stage", "b"}, 0, []string{"10 dead letters"}, 12},
		{"ls by error text and range", []string{"ls", "-c", cfg, "p", "--error", "NUMBER 1", "--offsets", "10-19"}, 0, []string{"10 dead letters"}, 12},
		{"ls limit", []string{"ls", "-c", cfg, "p", "--limit", "3"}, 0, []string{"the first 3 dead letters", "--limit 0"}, 5},
		{"ls json", []string{"ls", "-c", cfg, "p", "--json", "--offsets", "7-7"}, 0, []string{`"offset":7`, `"stage":"a"`, `"text":"value 7"`, `"source":{"topic":"` + src + `","partition":1,"offset":107}`}, 1},
		{"show", []string{"show", "-c", cfg, "p", "0@8"}, 0, []string{"dead letter  " + dlqTopic + "/0@8", "source       " + src + "/0@108", "stage        b", "error        bad thing number 8", "streamd-error: bad thing number 8", "value        value 8"}, 0},
		{"show truncated", []string{"show", "-c", cfg, "p", "0@39"}, 0, []string{"cannot be replayed", "value        null"}, 0},
		{"show missing", []string{"show", "-c", cfg, "p", "0@400"}, 1, nil, 0},
		{"dry run", []string{"replay", "-c", cfg, "p", "--dry-run"}, 0, []string{"40 dead letters selected, 39 would be replayed, 1 skipped"}, 1},
		{"no such pipeline", []string{"ls", "-c", cfg, "q"}, 1, nil, 0},
		{"pipeline without dlq", []string{"ls", "-c", cfg, "nodlq"}, 1, nil, 0},
		{"bad offsets", []string{"ls", "-c", cfg, "p", "--offsets", "9-3"}, 2, []string{`"3" is not an offset at or above 9`}, 0},
		{"bad position", []string{"show", "-c", cfg, "p", "8"}, 2, []string{"want PARTITION@OFFSET"}, 0},
		{"no config", []string{"ls", "p"}, 2, []string{"-c config.toml is required"}, 0},
		{"unknown command", []string{"rm", "-c", cfg, "p"}, 2, []string{`unknown command "rm"`}, 0},
		{"bad target", []string{"replay", "-c", cfg, "p", "--to", "nowhere"}, 2, []string{`--to "nowhere"`}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := run(tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errs)
			}
			text := out
			if code == 2 {
				text = errs
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Fatalf("no %q in:\n%s", w, text)
				}
			}
			if n := strings.Count(out, "\n"); tt.lines > 0 && n != tt.lines {
				t.Fatalf("%d lines, want %d:\n%s", n, tt.lines, out)
			}
		})
	}

	// Replay stage b's dead letters to their source topic and partition.
	code, out, errs := run("replay", "-c", cfg, "p", "--stage", "b")
	if code != 0 || !strings.Contains(out, "10 dead letters selected of 40 read; 10 replayed to their source topics; 0 skipped") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
	}
	rc := b.Client(t, kgo.ConsumeTopics(src), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := 0
	for got < 10 {
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of 10 replayed records in %s", got, src)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			var i int
			if _, err := fmt.Sscanf(string(r.Key), "key-%d", &i); err != nil {
				t.Errorf("replayed key %q: %v", r.Key, err)
			}
			if i%4 != 0 || r.Partition != int32(i%2) || string(r.Value) != fmt.Sprintf("value %d", i) {
				t.Errorf("replayed %s to partition %d: %q", r.Key, r.Partition, r.Value)
			}
			if len(r.Headers) != 2 || r.Headers[0].Key != "streamd-replay-of" || string(r.Headers[0].Value) != fmt.Sprintf("%s/0@%d", dlqTopic, i) ||
				r.Headers[1].Key != "streamd-replay-count" || string(r.Headers[1].Value) != "1" {
				t.Errorf("replayed %s headers %+v", r.Key, r.Headers)
			}
		})
	}
}
